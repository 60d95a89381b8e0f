"""Which department resolves a ticket: its category's entry in ``departments.toml``.

Tickets carry a category (domain.toml); the directory (directory.toml) names the departments.
The mapping is checked against both at startup: a category without a department would be a
ticket nobody in a department sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import Config
from bot.core.datafile import DataFile
from bot.dialog.domain import load_domain
from bot.knowledge.data import load_directory


class RoutingError(ValueError):
    """departments.toml does not fit domain.toml or directory.toml; the message names the key."""


@dataclass(frozen=True)
class Routing:
    by_category: dict[str, str]  # category -> department id
    department_names: dict[str, str]  # department id -> its name ("도로과"), directory order
    category_labels: dict[str, str]  # category -> its label ("가로등·보안등"), domain order

    def department_of(self, category: str) -> str | None:
        return self.by_category.get(category)

    def categories_of(self, department: str) -> list[str]:
        return [c for c, d in self.by_category.items() if d == department]

    @classmethod
    def load(cls, config: Config) -> Routing:
        path = config.path(config.desk.departments_file)
        source = DataFile.read(path, RoutingError, "desk departments file")
        source.no_unknown((), ("category",), what="table")
        table = source.table(("category",))
        domain = load_domain(config.path(config.llm.domain_file))
        directory = load_directory(config.path(config.llm.directory_file))
        names = {d.id: d.name for d in directory.departments}
        labels = {c.name: c.label for c in domain.categories}
        for category, dept in table.items():
            if category not in labels:
                raise source.error(("category", category), f"not a category of {config.llm.domain_file}")
            if dept not in names:
                raise source.error(("category", category), f"{dept!r}: not a department of {config.llm.directory_file}")
        missing = [c for c in labels if c not in table]
        if missing:
            raise source.error(("category",), f"category.{missing[0]} is missing (every category needs a department)")
        return cls(by_category=dict(table), department_names=names, category_labels=labels)
