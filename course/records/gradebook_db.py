"""Where a graded course's gradebook lives: a SQLite file beside it (the default) or a PostgreSQL database.

SQLite lets one writer in at a time, which suits one instructor.  Several teaching assistants grading by
hand at once, or graders on several machines, share a PostgreSQL database instead: ``course grade --db
postgresql://USER@HOST:PORT/DATABASE`` (or ``c.CourseGrade.db_url`` in the course's nbgrader_config.py).
The URL is recorded in ``OUT/nbgrader/gradebook.url`` by the first grading, and every later command on OUT
(a re-grade, formgrader, feedback, export) and every nbgrader run on it reads it from there, so that nobody
has to repeat it and no command grades into a second gradebook by mistake.

The URL is SQLAlchemy's, as nbgrader takes it: ``postgresql://`` uses the psycopg (3) driver.
"""

from __future__ import annotations

from pathlib import Path

URL_FILE = "gradebook.url"
SQLITE_FILE = "gradebook.db"
SCHEMES = ("sqlite", "postgresql")
INSTALL_HINT = ("the PostgreSQL driver is not installed: pip install 'psycopg[binary]' "
                "(it is in .binder/requirements.txt; `make` installs it)")


class BadDatabase(ValueError):
    """A --db URL that names no gradebook this course can use."""


def sqlite_url(root: Path) -> str:
    return f"sqlite:///{Path(root) / SQLITE_FILE}"


def url_of(root: Path) -> str:
    """The gradebook URL of the graded course whose nbgrader folder is ``root``."""
    recorded = Path(root) / URL_FILE
    if recorded.is_file():
        return recorded.read_text(encoding="utf-8").strip()
    return sqlite_url(root)


def exists(root: Path) -> bool:
    """Whether ``root`` holds a graded course's gradebook (its SQLite file, or the URL of its database)."""
    return (Path(root) / URL_FILE).is_file() or (Path(root) / SQLITE_FILE).is_file()


def describe(root: Path) -> str:
    """The gradebook for a message: the SQLite file, or the database URL without its password."""
    url = url_of(root)
    if url.startswith("sqlite"):
        return str(Path(root) / SQLITE_FILE)
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def nbgrader_args(root: Path) -> list[str]:
    """The option that points an nbgrader run on ``root`` at its database; none for the SQLite default."""
    return [f"--CourseDirectory.db_url={url_of(root)}"] if (Path(root) / URL_FILE).is_file() else []


def check(url: str) -> str:
    """``url`` if it names a gradebook database this course can reach; else :class:`BadDatabase` saying why."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    expected = "expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE or sqlite:////absolute/path.db"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise BadDatabase(f"--db: {url!r} is not a database URL; {expected}") from None
    if parsed.get_backend_name() not in SCHEMES:
        raise BadDatabase(f"--db: {parsed.get_backend_name()!r} databases are not supported; {expected}")
    if parsed.get_backend_name() == "postgresql":
        if not parsed.database:
            raise BadDatabase(f"--db: {describe_url(url)} names no database; {expected}")
        try:
            import psycopg  # noqa: F401 - SQLAlchemy 2.1's driver for postgresql://
        except ImportError:
            raise BadDatabase(f"--db: {INSTALL_HINT}") from None
        try:
            engine = create_engine(url)
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            engine.dispose()
        except SQLAlchemyError as error:
            first = str(getattr(error, "orig", error)).strip().splitlines()[0]
            raise BadDatabase(f"--db: cannot reach {describe_url(url)}: {first}") from None
    return url


def describe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def configured() -> str | None:
    """The course config's ``c.CourseGrade.db_url`` (nbgrader_config.py of the course folder), if it sets one."""
    from traitlets.config.loader import PyFileConfigLoader

    from ..grading.nbgrader_run import ROOT

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    value = config.CourseGrade.get("db_url") if "CourseGrade" in config else None
    return str(value) if value else None


def choose(root: Path, url: str | None) -> str:
    """Record the gradebook of a graded course at its first grading; return the URL in use.

    ``url`` (from --db, else the course config) must agree with what ``root`` already uses: a second
    gradebook for the same graded course would split its grades.
    """
    root = Path(root)
    url = url or configured()
    if url is None:
        return url_of(root)
    check(url)
    if url.startswith("sqlite") and url == sqlite_url(root) and not (root / URL_FILE).is_file():
        return url
    if exists(root) and url_of(root) != url:
        raise BadDatabase(f"--db: {root.parent} is graded into {describe(root)}, not {describe_url(url)}; "
                          f"grade into another --out, or drop --db to use the one it has")
    root.mkdir(parents=True, exist_ok=True)
    (root / URL_FILE).write_text(url + "\n", encoding="utf-8")
    return url


def clear(root: Path) -> None:
    """Drop the gradebook's tables from its database (``--fresh``); a SQLite file goes with OUT/nbgrader."""
    if not (Path(root) / URL_FILE).is_file():
        return
    from nbgrader.api import Base
    from sqlalchemy import create_engine, text

    engine = create_engine(url_of(root))
    with engine.begin() as connection:
        Base.metadata.drop_all(bind=connection)
        connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
    engine.dispose()
