"""The walls of docs/ARCHITECTURE.md, kept by a test: a source reaches only what is on `self`
(no store, archive or artifact manifest), and commands are thin calls into the library (no SQL)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.IGNORECASE)


def _python_files(folder: str) -> list[Path]:
    files = sorted((ROOT / folder).glob("*.py"))
    assert files, f"no modules found under {folder}/"
    return files


def test_sources_touch_neither_the_store_nor_the_archive_nor_the_manifest():
    reaching = [f"{path.name}:{number}: {line.strip()}"
                for path in _python_files("sources")
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if re.search(r"self\.store|Archive\(|Artifacts\(", line)]
    assert reaching == []


def test_commands_hold_no_sql():
    with_sql = [f"{path.name}:{number}: {line.strip()}"
                for path in _python_files("basecrawler/commands")
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if SQL.search(line)]
    assert with_sql == []


def test_the_pipeline_spine_stays_readable_in_one_sitting():
    lines = (ROOT / "basecrawler" / "pipeline" / "crawler.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"crawler.py has {lines} lines; move what is not the pipeline into its own module"


# ---- record types (issue #24) -------------------------------------------------------------
# Words naming the vehicle_recall type or one of its fields: framework code reads a record
# type's declaration instead of naming it.
TYPE_WORDS = re.compile(r"\b(vehicle_recall|recall_number|recall_date|manufacturer_original|manufacturer_key|"
                        r"model_original|model_year)\b")
# Framework modules that name a type by design: the declaration API and its helpers
# (basecrawler/recordtypes/, e.g. the default type of sources written before types), the
# store's frozen history (migrations 1-8 built the one table there was: migrations_early.py and
# migrations.py), and the shim that keeps `basecrawler.model` imports working.
NAMES_TYPES_BY_DESIGN = ("basecrawler/recordtypes/", "basecrawler/store/migrations.py",
                         "basecrawler/store/migrations_early.py", "basecrawler/model.py")
# Not generic yet: file → the words it may still use, and why. The list only shrinks: a file
# that no longer uses a word must leave it (the test below says so). Empty since migration 10
# renamed the dead-letter and enrichment-queue key columns.
NOT_YET_GENERIC: dict[str, set[str]] = {}


def _type_words_by_file() -> dict[str, set[str]]:
    found = {}
    for path in sorted((ROOT / "basecrawler").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(NAMES_TYPES_BY_DESIGN):
            continue
        words = set(TYPE_WORDS.findall(path.read_text(encoding="utf-8")))
        if words:
            found[name] = words
    return found


def test_framework_code_never_names_a_record_type_or_its_fields():
    found = _type_words_by_file()
    named = {f"{name}: {', '.join(sorted(words - NOT_YET_GENERIC.get(name, set())))}"
             for name, words in found.items() if words - NOT_YET_GENERIC.get(name, set())}
    assert named == set(), "read the record type's declaration instead of naming the type or its fields"
    cleared = {name for name in NOT_YET_GENERIC if not found.get(name, set()) & NOT_YET_GENERIC[name]}
    cleared |= {f"{name}: {', '.join(sorted(NOT_YET_GENERIC[name] - found[name]))}" for name in NOT_YET_GENERIC
                if name in found and NOT_YET_GENERIC[name] - found[name]}
    assert cleared == set(), "no longer used: take these out of NOT_YET_GENERIC"


def test_the_framework_never_imports_a_type_module():
    importing = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in sorted((ROOT / "basecrawler").rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if re.match(r"\s*(from|import)\s+record_types\b", line)]
    assert importing == [], "the framework finds types through basecrawler.recordtypes.registry"


# A type module imports the declaration API, pydantic, the standard library and its siblings in
# record_types/ — nothing else of the framework (the maker-name rule table lives beside its
# type, record_types/vehicle_makers.py).
TYPE_MODULE_EXCEPTIONS: dict[str, set[str]] = {}


def test_a_type_module_imports_nothing_but_the_declaration_api():
    import ast
    import sys

    offending = []
    for path in sorted((ROOT / "record_types").glob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = ["record_types" if node.level else node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                allowed = (top in sys.stdlib_module_names or top in ("pydantic", "__future__", "record_types")
                           or module == "basecrawler.recordtypes" or module.startswith("basecrawler.recordtypes.")
                           or module in TYPE_MODULE_EXCEPTIONS.get(name, set()))
                if not allowed:
                    offending.append(f"{name}: {module}")
    assert offending == []


def _module_imports(deferred: bool = False) -> dict[str, set[str]]:
    """basecrawler module → the basecrawler modules it imports at module level (imports inside
    functions and under `if TYPE_CHECKING:` are not edges: they run later or never); with
    `deferred`, those inside functions too (an import put off until it runs)."""
    import ast

    paths = {}
    for path in (ROOT / "basecrawler").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in (_imports_outside_type_checking(tree) if deferred else tree.body):
            if isinstance(node, ast.ImportFrom):
                base = (package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else [])
                module = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    edges.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in paths else module)
            elif isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
        # A package's __init__ re-exporting its modules is not a circle of theirs.
        graph[name] = {e for e in edges if e in paths and e != name and not name.startswith(e + ".")
                       and e != "basecrawler"}
    return graph


def _imports_outside_type_checking(tree):
    """Every import statement of a module, those inside functions included, but not those
    under `if TYPE_CHECKING:` (they never run)."""
    import ast

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from (item for branch in child.orelse for item in walk_one(branch))
                continue
            yield from walk_one(child)

    def walk_one(node):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        else:
            yield from walk(node)
    return walk(tree)


def test_no_import_circle_between_framework_modules():
    assert _circles(_module_imports()) == []


def test_no_circle_put_off_by_an_import_inside_a_function():
    """An import inside a function (kept there so that the CLI starts without it) is a
    dependency all the same: it must not close a circle either (registry.py once named the
    crawler's class, whose run regroups by discovering the sources)."""
    assert _circles(_module_imports(deferred=True)) == []


# Folders whose files sit on both sides of another folder, by the files that cross (each reason
# in docs/DETAILS.md, "The house"); any other pair of folders using each other is a circle.
FOLDERS_CROSSED = {
    ("i18n", "reading"): {"i18n/extract.py"},   # the catalogue's extraction tool reads the web view
    ("reading", "watch"): {"reading/web/plugins/basecrawler_watch.py"},   # the web view serves watch feeds
    ("recordtypes", "store"): {"recordtypes/derived.py", "recordtypes/statistics.py", "recordtypes/tables.py",
                               "recordtypes/upsert.py"},   # statements spelled by store/engines/dialect.py
}


def test_folders_use_each_other_one_way_but_for_the_reasons_written_down():
    """Folder by folder (a module of the package root is its own), imports inside functions
    counted: no circle once the crossings of FOLDERS_CROSSED are left out, and no other file
    crosses. (pipeline/ once used operations/upkeep.py, fetch/ pipeline/stopping.py, formats/
    pipeline/registry.py.)"""
    graph = _module_imports(deferred=True)
    paths = {name: (ROOT / "basecrawler" / Path(*name.split(".")[1:])) for name in graph}

    def folder(name: str) -> str:
        parts = name.split(".")
        return parts[1] if len(parts) > 2 or (len(parts) == 2 and paths[name].is_dir()) else parts[-1]

    def file_of(name: str) -> str:
        path = paths[name]
        return str((path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).relative_to(ROOT / "basecrawler"))

    folders: dict[str, set[str]] = {}
    crossing: dict[tuple[str, str], set[str]] = {}
    for module, imported in graph.items():
        for other in imported:
            edge = (folder(module), folder(other))
            if edge[0] != edge[1]:
                crossing.setdefault(edge, set()).add(file_of(module))
    for edge, files in crossing.items():
        if files - FOLDERS_CROSSED.get(edge, set()):
            folders.setdefault(edge[0], set()).add(edge[1])
    for edge, files in FOLDERS_CROSSED.items():
        assert files <= crossing.get(edge, set()), f"{edge}: no longer crossed by {files - crossing.get(edge, set())}"
    assert _circles({name: folders.get(name, set()) for name in {f for edge in crossing for f in edge}}) == []


def _circles(graph: dict[str, set[str]]) -> list[str]:
    circles, done = [], set()

    def visit(module, path):
        for imported in sorted(graph[module]):
            if imported in path:
                circles.append(" → ".join(path[path.index(imported):] + [imported]))
            elif imported not in done:
                visit(imported, path + [imported])
        done.add(module)
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    return circles


# ---- no reaching into another object's private state (read from the code's syntax tree) ------
# What is still allowed, each with its reason; the list can only shrink.
PRIVATE_ALLOWED = {
    # lxml documents its element class under this name; there is no public alias to annotate with.
    "etree._Element",
}


def _python_files_below(folder: str) -> list[Path]:
    """Every module of a folder and of the packages inside it."""
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, f"no modules found under {folder}/"
    return files


def _private_uses(folder: str) -> list[str]:
    import ast

    found = []
    for path in _python_files_below(folder):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if ast.unparse(node) not in PRIVATE_ALLOWED:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import {alias.name}"
                          for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_code_uses_another_objects_private_state():
    assert [hit for folder in ("basecrawler", "sources", "record_types") for hit in _private_uses(folder)] == []


def test_no_protocol_stands_in_for_a_class_to_break_an_import_circle():
    import ast

    protocols = [f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}"
                 for path in _python_files_below("basecrawler")
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.ClassDef) and any(ast.unparse(base) in ("Protocol", "typing.Protocol")
                                                            for base in node.bases)]
    assert protocols == []


# ---- the store is a connection plus one repository per table (issue #35) ----------------------
# Each bookkeeping table's statements live in its repository: the ledger's and the enrichment
# queue's entirely (nothing else reads them either), the runs' and the dead letters' writes
# (readers elsewhere may count them). A table's SQL found anywhere else is a job the store lost.
TABLE_OWNERS = {
    "list_ledger": ("basecrawler/store/ledger.py", r"(?:FROM|INTO|UPDATE|JOIN)"),
    "enrichment": ("basecrawler/store/enrichment_queue.py", r"(?:FROM|INTO|UPDATE|JOIN)"),
    "crawl_runs": ("basecrawler/store/runs.py", r"(?:INTO|UPDATE|DELETE\s+FROM)"),
    "dead_letters": ("basecrawler/store/deadletters.py", r"(?:INTO|UPDATE|DELETE\s+FROM)"),
}
MODULE_LINES = 400   # "modules small and single-purpose (about 400 lines at most)"


def test_each_bookkeeping_table_is_spoken_to_by_its_repository_only():
    misplaced = []
    for folder in ("basecrawler", "sources", "record_types"):
        for path in _python_files_below(folder):
            name = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8")
            for table, (owner, verbs) in TABLE_OWNERS.items():
                if name != owner and re.search(rf"\b{verbs}\s+[\[\"]?{table}\b", text, re.IGNORECASE):
                    misplaced.append(f"{name}: SQL of {table} (its repository is {owner})")
    assert misplaced == []


def test_every_framework_module_stays_small():
    """Every module of the framework (the store's, the pipeline's, the web view's plugins …)."""
    big = {path.relative_to(ROOT).as_posix(): lines for path in _python_files_below("basecrawler")
           if (lines := path.read_text(encoding="utf-8").count("\n")) > MODULE_LINES}
    assert big == {}, f"split these modules (at most {MODULE_LINES} lines each): {big}"
