"""Question and answer templates of the rule drafter and the pair drafter, plus the English helpers
they need (plurals, articles, number and ordinal words).

Templates are data: one tuple of :meth:`str.format` strings per (question kind), chosen with a seeded
RNG by :mod:`witness.annotate.rules` and :mod:`witness.annotate.pairs`. Placeholders:

* ``{a}``, ``{b}`` — a class name (singular, as written in the scene labels, ``_`` read as a space);
* ``{as_}``, ``{bs}`` — the plural of ``{a}``, ``{b}``;
* ``{an_a}`` — ``{a}`` with its indefinite article ("a car", "an umbrella");
* ``{x}``, ``{y}`` — a referring expression that picks out exactly one object ("the red car");
* ``{n}``, ``{n_word}`` — a count in digits or words; ``{value}`` — an attribute value.

Answers never state a number unless the item's ``count`` says the same number: the AGC suite reads
the first cardinal number of an answer (digits or zero … twenty), so a lane is written as an
ordinal ("the second lane"), never "lane 2", inside an answer.

>>> plural("bus"), plural("person"), plural("traffic_light"), with_article("umbrella")
('buses', 'people', 'traffic lights', 'an umbrella')
>>> number_word(7), number_word(21), ordinal(2)
('seven', '21', 'second')
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "QUESTION_TEMPLATES",
    "ANSWER_TEMPLATES",
    "PAIR_TEMPLATES",
    "NUMBER_WORDS",
    "ORDINALS",
    "name",
    "plural",
    "with_article",
    "number_word",
    "ordinal",
    "capitalize",
    "template_regex",
]

#: Cardinal number words zero … twenty (the words the AGC suite reads back as counts).
NUMBER_WORDS: tuple[str, ...] = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
)

#: Ordinal words for lanes 1 … 12 (an ordinal is not a count, so an answer may say "second lane").
ORDINALS: tuple[str, ...] = (
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth",
)

_IRREGULAR = {
    "person": "people",
    "man": "men",
    "woman": "women",
    "child": "children",
    "mouse": "mice",
    "sheep": "sheep",
    "deer": "deer",
    "fish": "fish",
    "skis": "skis",
    "scissors": "scissors",
    "people": "people",
}


@lru_cache(maxsize=4096)
def name(label: str) -> str:
    """A class label as it reads in a sentence: ``_`` and ``-`` become spaces, trimmed.

    >>> name("traffic_light")
    'traffic light'
    """
    return re.sub(r"[_\-]+", " ", str(label)).strip()


@lru_cache(maxsize=4096)
def plural(label: str) -> str:
    """English plural of a class name (last word pluralized; a few irregular nouns).

    Rule: irregular table, else ``s/x/z/ch/sh`` + ``es``, consonant + ``y`` -> ``ies``, else + ``s``.

    >>> plural("wine glass"), plural("baby"), plural("car")
    ('wine glasses', 'babies', 'cars')
    """
    words = name(label).split(" ")
    last = words[-1]
    low = last.lower()
    if low in _IRREGULAR:
        out = _IRREGULAR[low]
    elif re.search(r"(s|x|z|ch|sh)$", low):
        out = last + "es"
    elif re.search(r"[^aeiou]y$", low):
        out = last[:-1] + "ies"
    else:
        out = last + "s"
    return " ".join(words[:-1] + [out])


@lru_cache(maxsize=4096)
def with_article(label: str) -> str:
    """``label`` with "a" or "an" (by its first letter).

    >>> with_article("car"), with_article("apple")
    ('a car', 'an apple')
    """
    n = name(label)
    return ("an " if n[:1].lower() in "aeiou" else "a ") + n


def number_word(n: int) -> str:
    """``n`` in words for 0 … 20, else in digits.

    >>> number_word(0), number_word(20)
    ('zero', 'twenty')
    """
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def ordinal(k: int) -> str | None:
    """The ordinal word of ``k`` (1 -> "first"), or None beyond twelve.

    >>> ordinal(1), ordinal(13)
    ('first', None)
    """
    return ORDINALS[k - 1] if 1 <= k <= len(ORDINALS) else None


def capitalize(text: str) -> str:
    """Upper-case the first character only.

    >>> capitalize("the red car.")
    'The red car.'
    """
    return text[:1].upper() + text[1:]


def template_regex(template: str) -> re.Pattern:
    """A regex that matches every sentence the template can produce (placeholders match ``.+?``).

    >>> bool(template_regex("Is {x} left of {y}?").fullmatch("Is the bus left of the red car?"))
    True
    """
    parts = re.split(r"\{[a-z_]+\}", template)
    return re.compile("(?:.+?)".join(re.escape(p) for p in parts), re.IGNORECASE)


#: Question templates of the rule drafter, by question kind (see :mod:`witness.annotate.rules`).
QUESTION_TEMPLATES: dict[str, tuple[str, ...]] = {
    "existence": (
        "Is there {an_a} in the image?",
        "Can you see {an_a} in this picture?",
        "Does the image contain any {as_}?",
        "Are there any {as_} in the scene?",
    ),
    "counting": (
        "How many {as_} are there?",
        "How many {as_} are in the image?",
        "Count the {as_} in the scene.",
        "What is the number of {as_} in this picture?",
    ),
    "counting_attr": (
        "How many {desc} {as_} are there?",
        "How many {desc} {as_} can you see?",
        "Count the {desc} {as_} in the image.",
    ),
    "comparison_more": (
        "Are there more {as_} than {bs}?",
        "Does the image show more {as_} than {bs}?",
        "Are {as_} more numerous than {bs} here?",
    ),
    "comparison_fewer": (
        "Are there fewer {as_} than {bs}?",
        "Does the image show fewer {as_} than {bs}?",
        "Are {as_} less numerous than {bs} here?",
    ),
    "comparison_equal": (
        "Are there as many {as_} as {bs}?",
        "Is the number of {as_} equal to the number of {bs}?",
        "Does the image show the same number of {as_} and {bs}?",
    ),
    "identification_largest": (
        "What is the largest object in the image?",
        "Which kind of object takes up the most space in the picture?",
        "What is the biggest object in the scene?",
    ),
    "identification_leftmost": (
        "What is the leftmost object in the image?",
        "What kind of object is furthest to the left?",
    ),
    "identification_rightmost": (
        "What is the rightmost object in the image?",
        "What kind of object is furthest to the right?",
    ),
    "identification_unique": (
        "What type of object is {desc}?",
        "Which kind of object is {desc}?",
        "What is the object that is {desc}?",
    ),
    "identification_nearest": (
        "What is the object nearest to the crosswalk?",
        "Which kind of object is closest to the crosswalk?",
        "What is closest to the zebra crossing?",
    ),
    "selection_superlative": (
        "Which {a} is the {sup}?",
        "Which of the {as_} is the {sup}?",
    ),
    "selection_unique": (
        "Which {group} is {desc}?",
        "Which of the {group_pl} is {desc}?",
    ),
    "attribute_color": (
        "What colour is {x}?",
        "What color is {x}?",
        "Which colour does {x} have?",
    ),
    "attribute_motion": (
        "Is {x} moving or waiting?",
        "Is {x} moving, or is it waiting?",
    ),
    "attribute_direction": (
        "Is {x} approaching or receding?",
        "Is {x} approaching the camera or receding from it?",
    ),
    "attribute_lane": (
        "Which lane is {x} in?",
        "In which lane, counting from the left, is {x}?",
    ),
    "attribute_area": (
        "Is {x} on the road, on the crosswalk or on the sidewalk?",
        "Where is {x}: on the road, the crosswalk or the sidewalk?",
    ),
    "spatial_left": (
        "Is {x} left of {y}?",
        "Is {x} to the left of {y}?",
        "Does {x} appear on the left of {y}?",
    ),
    "spatial_right": (
        "Is {x} right of {y}?",
        "Is {x} to the right of {y}?",
        "Does {x} appear on the right of {y}?",
    ),
    "spatial_on_crosswalk": (
        "How many {as_} are on the crosswalk?",
        "How many {as_} are on the zebra crossing?",
        "Count the {as_} on the crosswalk.",
    ),
    "spatial_on_crosswalks": (
        "How many {as_} are on a crosswalk?",
        "How many {as_} are on any of the zebra crossings?",
        "Count the {as_} on a crosswalk.",
    ),
    "spatial_nearest": (
        "Which {a} is nearest to the crosswalk?",
        "Which of the {as_} is closest to the zebra crossing?",
    ),
}

#: Answer templates by answer kind.
ANSWER_TEMPLATES: dict[str, tuple[str, ...]] = {
    "yes": ("Yes.", "Yes."),
    "no": ("No.", "No."),
    "existence_yes": ("Yes.", "Yes, there is {an_a}.", "Yes, I can see {an_a}."),
    "existence_yes_many": ("Yes.", "Yes, there are {as_}.", "Yes, I can see {as_}."),
    "existence_no": ("No.", "No, there is no {a}.", "No, there are no {as_}."),
    "count": ("{n}", "There are {n} {as_}.", "{n_word_cap} {as_}."),
    "count_one": ("1", "There is 1 {a}.", "One {a}."),
    "count_attr": ("{n}", "There are {n} {desc} {as_}.", "{n_word_cap}."),
    "count_attr_one": ("1", "There is 1 {desc} {a}.", "One."),
    "class": ("{an_a_cap}.", "It is {an_a}.", "{a_cap}."),
    "description": ("{d_cap}.", "It is {d}."),
    "value": ("{value_cap}.", "It is {value}."),
}

#: Pair templates: (question 1, question 2) per pair kind; see :mod:`witness.annotate.pairs`.
PAIR_TEMPLATES: dict[str, tuple[tuple[str, str], ...]] = {
    "comparison_more_fewer": (
        ("Are there more {as_} than {bs}?", "Are there fewer {bs} than {as_}?"),
        ("Does the image show more {as_} than {bs}?", "Does the image show fewer {bs} than {as_}?"),
    ),
    "comparison_equal": (
        ("Are there as many {as_} as {bs}?", "Is the number of {bs} equal to the number of {as_}?"),
    ),
    "spatial_left_right": (
        ("Is {x} left of {y}?", "Is {y} right of {x}?"),
        ("Is {x} to the left of {y}?", "Is {y} to the right of {x}?"),
    ),
    "existence_free": (
        ("Is there {an_a} in the image?", "Is the scene free of {as_}?"),
        ("Can you see any {as_}?", "Is the picture without any {as_}?"),
    ),
    "attribute_color_same": (
        ("Is {x} {value}?", "Is the colour of {x} {value}?"),
        ("Is {x} {value}?", "Does {x} have the colour {value}?"),
    ),
    "attribute_color_negated": (
        ("Is {x} {value}?", "Is {x} not {value}?"),
    ),
    "state_motion": (
        ("Is {x} moving?", "Is {x} waiting?"),
        ("Is {x} in motion?", "Is {x} standing still?"),
    ),
    "state_direction": (
        ("Is {x} approaching?", "Is {x} receding?"),
        ("Is {x} coming towards the camera?", "Is {x} driving away from the camera?"),
    ),
}
