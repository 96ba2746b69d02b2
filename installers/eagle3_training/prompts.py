"""The prompts the built-in model answers for its head's training, and the plain text it reads.

Prompts are tasks crossed with subjects (:data:`TASKS` x :data:`SUBJECTS`): questions, lists,
explanations, poems, stories, code, advice, emails, summaries. The training set and the held-out
set share no subject (:func:`training_prompts`, :func:`held_out_prompts`), so acceptance measured on
the held-out prompts is acceptance on questions the head never saw. Plain text is what every
machine with Python has: the docstrings of the standard library (:func:`plain_texts`).
"""

from __future__ import annotations

import importlib
import inspect
import random
import sys
import warnings

TASKS = [
    "What is {s}? Answer in a short paragraph.",
    "Explain {s} to a ten-year-old.",
    "List five facts about {s}.",
    "Give me three tips related to {s}.",
    "Write a short poem about {s}.",
    "Write a haiku about {s}.",
    "Write a short story that involves {s}.",
    "What are the pros and cons of {s}?",
    "Describe {s} in three sentences.",
    "Why do people care about {s}?",
    "Write an email to a friend about {s}.",
    "Summarize the history of {s} in one paragraph.",
    "What are common mistakes people make with {s}?",
    "Give me a step-by-step guide to getting started with {s}.",
    "Compare {s} with something similar and explain the difference.",
    "Write a Python function related to {s}, with a docstring.",
    "Ask me three quiz questions about {s}, with answers.",
    "Write a short product description for something related to {s}.",
    "How would you explain {s} in a job interview?",
    "Tell me a joke about {s}.",
]

SUBJECTS = [
    "the moon", "volcanoes", "coffee", "chess", "the Roman Empire", "photosynthesis", "electric cars",
    "bees", "rainbows", "the internet", "gardening", "jazz music", "the ocean", "recycling", "dinosaurs",
    "sleep", "the human heart", "bicycles", "pizza", "the solar system", "mountains", "libraries",
    "friendship", "running", "trains", "the weather", "money", "vaccines", "robots", "cats", "dogs",
    "rivers", "deserts", "music lessons", "cooking rice", "learning a language", "time management",
    "public speaking", "saving energy at home", "the printing press", "airplanes", "bread baking",
    "the Olympic Games", "snow", "forests", "spreadsheets", "passwords", "databases", "sorting algorithms",
    "prime numbers", "fractions", "the water cycle", "earthquakes", "tea", "museums", "birds", "whales",
    "camping", "painting", "photography", "the French Revolution", "ancient Egypt", "solar panels",
    "3D printing", "email etiquette", "budgeting", "the stock market", "yoga", "meditation", "football",
    "tennis", "chocolate", "cheese", "the Great Wall of China", "lighthouses", "submarines", "clocks",
    "maps", "the alphabet", "poetry", "theatre", "video games", "board games", "smartphones", "batteries",
    "magnets", "gravity", "light", "sound", "the immune system", "nutrition", "vitamins", "houseplants",
    "apples", "honey", "the Arctic", "penguins", "castles", "knights", "pirates", "space stations",
]

HELD_OUT_SUBJECTS = [
    "lakes", "owls", "glass", "umbrellas", "the violin", "origami", "tides", "wind turbines", "bridges",
    "coral reefs", "keyboards", "soap", "kites", "mushrooms", "the Renaissance", "windmills",
]


def _prompts(subjects: list[str], n: int, seed: int) -> list[str]:
    pairs = [(t, s) for t in TASKS for s in subjects]
    random.Random(seed).shuffle(pairs)
    return [t.format(s=s) for t, s in pairs[:n]]


def training_prompts(n: int, seed: int = 0) -> list[str]:
    """``n`` prompts (at most len(TASKS) * len(SUBJECTS)) over the training subjects."""
    return _prompts(SUBJECTS, n, seed)


def held_out_prompts(n: int, seed: int = 1) -> list[str]:
    """``n`` prompts over subjects the training never saw."""
    return _prompts(HELD_OUT_SUBJECTS, n, seed)


PLAIN_MODULES = ["argparse", "asyncio", "collections", "csv", "datetime", "decimal", "email", "fractions",
                 "functools", "http.client", "itertools", "json", "logging", "os", "pathlib", "random", "re",
                 "sqlite3", "statistics", "string", "subprocess", "textwrap", "threading", "unittest", "urllib.parse",
                 "zipfile", "shutil", "tarfile", "heapq", "bisect", "calendar", "difflib", "inspect", "typing"]


def plain_texts(min_chars: int = 400) -> list[str]:
    """Docstrings of the standard library modules above and their public members, each of
    ``min_chars`` or more, in a fixed order."""
    texts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in PLAIN_MODULES:
            module = importlib.import_module(name)
            members = [module] + [m for _, m in sorted(vars(module).items()) if not _.startswith("_")]
            for member in members:
                if getattr(member, "__module__", module.__name__) != module.__name__ and member is not module:
                    continue
                doc = inspect.getdoc(member) or ""
                if len(doc) >= min_chars and doc not in texts:
                    texts.append(doc)
    return texts


if __name__ == "__main__":
    print(len(training_prompts(10**6)), "training prompts;", len(plain_texts()), "plain texts", file=sys.stderr)
