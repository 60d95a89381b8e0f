"""The city's own facts: FAQ and department directory, looked up for each caller turn.

    knowledge = Knowledge.load("bot/data/faq.toml", "bot/data/directory.toml")   # at startup
    found = knowledge.lookup("음 등본 떼려면 어디 가요", slots=state.known_slots())
    if found.directory_hit:
        say(directory_reply(found.directory_hit))
    facts = render_facts(found.hits)  # "" when nothing matched: the model says it does not know
"""

from bot.knowledge.data import Department, Directory, Entry, FaqEntry, KnowledgeDataError, load_directory, load_faq
from bot.knowledge.knowledge import FieldWeights, Knowledge, KnowledgeOptions, Lookup, directory_reply, render_facts

__all__ = [
    "Department",
    "Directory",
    "Entry",
    "FaqEntry",
    "FieldWeights",
    "Knowledge",
    "KnowledgeDataError",
    "KnowledgeOptions",
    "Lookup",
    "directory_reply",
    "load_directory",
    "load_faq",
    "render_facts",
]
