"""The 8 flat fact categories of seed 001, with the definitions the model is shown."""

from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    identity = "identity"
    preference = "preference"
    interest = "interest"
    personality = "personality"
    relationship = "relationship"
    experience = "experience"
    goal = "goal"
    guideline = "guideline"


DEFINITIONS: dict[Category, str] = {
    Category.identity: "name, location, occupation, age, demographic facts",
    Category.preference: "likes, dislikes, favorites, rankings",
    Category.interest: "topics, hobbies, domains the person engages with",
    Category.personality: "communication style, emotional tendencies, traits",
    Category.relationship: "dynamics between the people (or user and assistant), shared "
    "references, routines",
    Category.experience: "skills, past events, professional background",
    Category.goal: "desires, plans, aspirations",
    Category.guideline: "how the assistant should behave: rules, tone preferences, "
    "conditional instructions",
}
