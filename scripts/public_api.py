#!/usr/bin/env python3
"""A crate's public API as sorted lines, from rustdoc's JSON output (format 57 and near).

Usage: public_api.py list CRATE.json > CURRENT
       public_api.py check SNAPSHOT CURRENT VERSION CHANGELOG [--bless]

`list` prints the API; `check` compares it with the committed snapshot (scripts/semver-check.sh
runs both). Removed or changed lines are breaks: they need a version of the crate that semver
allows to break and a CHANGELOG section for it naming each; added lines need only the snapshot
updated. `--bless` writes the snapshot when that holds.

Every item a user can name from the crate root, one line each with its signature, written so
that a change a user's code can notice changes a line:

- a struct whose fields are all public and that is not `#[non_exhaustive]` is one line with
  its fields (adding a field breaks struct literals); otherwise the struct's line says `..`
  and each public field is a line of its own (adding one breaks nothing);
- an enum that is not `#[non_exhaustive]` is one line with its variants (a new variant breaks
  exhaustive `match`es); otherwise each variant is a line of its own;
- functions and methods by their types (parameter names are not part of the API);
- trait implementations, the auto traits (Send, Sync, ...) included, blanket ones left out.

Types are named by the path a user writes: an item re-exported at the crate root is named
there (`kvlint_sdk::Renderer`, wherever it is defined), so moving a type to another crate and
re-exporting it under the same name changes no line. Lines that go are breaks; lines that only
come are additions.
"""

import json
import re
import sys


# Marker traits rustdoc lists that a user cannot name on stable Rust (or that only say how
# PartialEq was derived): they change with the toolchain, not with the crate.
UNSTABLE_MARKERS = {"Freeze", "UnsafeUnpin", "StructuralPartialEq"}
NEGATIVE_IMPL = re.compile(r"^impl(<[^>]*>)? !")


class Api:
    def __init__(self, doc):
        self.index = doc["index"]
        self.paths = doc["paths"]
        self.crate = self.index[str(doc["root"])]["name"]
        self.public_path = {}  # item id -> the path a user writes
        self.lines = set()

    def item(self, item_id):
        return self.index.get(str(item_id))

    # ---- names ----

    def type_path(self, item_id, written):
        if item_id is not None:
            if item_id in self.public_path:
                return self.public_path[item_id]
            summary = self.paths.get(str(item_id))
            if summary is not None and summary["crate_id"] != 0:
                crate, name = summary["path"][0], summary["path"][-1]
                # The standard library's and the workspace's own crates by name alone: where
                # they define an item is theirs to change (kvlint's crates are being split, and
                # the SDK re-exports what its users name); other crates by crate and name.
                if crate in ("std", "core", "alloc") or crate.startswith("kvlint"):
                    return name
                return f"{crate}::{name}"
        return written

    def path(self, path):
        name = self.type_path(path.get("id"), path["path"])
        return name + self.generic_args(path.get("args"))

    def generic_args(self, args):
        if not args:
            return ""
        if "angle_bracketed" in args:
            angle = args["angle_bracketed"]
            parts = [self.generic_arg(arg) for arg in angle["args"]]
            parts += [self.constraint(c) for c in angle["constraints"]]
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in args:
            paren = args["parenthesized"]
            inputs = ", ".join(self.ty(t) for t in paren["inputs"])
            output = paren.get("output")
            return f"({inputs})" + (f" -> {self.ty(output)}" if output else "")
        return ""

    def generic_arg(self, arg):
        if "lifetime" in arg:
            return arg["lifetime"]
        if "type" in arg:
            return self.ty(arg["type"])
        if "const" in arg:
            return arg["const"].get("expr", "_")
        return "_"

    def constraint(self, constraint):
        args = self.generic_args(constraint.get("args"))
        binding = constraint["binding"]
        if "equality" in binding:
            term = binding["equality"]
            value = self.ty(term["type"]) if "type" in term else term["constant"].get("expr", "_")
            return f"{constraint['name']}{args} = {value}"
        return f"{constraint['name']}{args}: {self.bounds(binding['constraint'])}"

    def bounds(self, bounds):
        out = []
        for bound in bounds:
            if "trait_bound" in bound:
                tb = bound["trait_bound"]
                modifier = {"maybe": "?", "maybe_const": "~const "}.get(tb.get("modifier"), "")
                out.append(modifier + self.hrtb(tb.get("generic_params")) + self.path(tb["trait"]))
            elif "outlives" in bound:
                out.append(bound["outlives"])
            elif "use" in bound:
                out.append("use<" + ", ".join(str(u) for u in bound["use"]) + ">")
        return " + ".join(out)

    def hrtb(self, params):
        if not params:
            return ""
        return "for<" + ", ".join(p["name"] for p in params) + "> "

    def ty(self, ty):
        if ty is None:
            return "()"
        (kind, value), = ty.items() if isinstance(ty, dict) else (("infer", None),)
        if kind == "resolved_path":
            return self.path(value)
        if kind == "generic":
            return value
        if kind == "primitive":
            return value
        if kind == "borrowed_ref":
            lifetime = value["lifetime"] + " " if value.get("lifetime") else ""
            mutable = "mut " if value["is_mutable"] else ""
            return f"&{lifetime}{mutable}{self.ty(value['type'])}"
        if kind == "raw_pointer":
            return ("*mut " if value["is_mutable"] else "*const ") + self.ty(value["type"])
        if kind == "slice":
            return f"[{self.ty(value)}]"
        if kind == "array":
            return f"[{self.ty(value['type'])}; {value['len']}]"
        if kind == "tuple":
            inner = ", ".join(self.ty(t) for t in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if kind == "impl_trait":
            return "impl " + self.bounds(value)
        if kind == "dyn_trait":
            traits = [self.hrtb(t.get("generic_params")) + self.path(t["trait"]) for t in value["traits"]]
            if value.get("lifetime"):
                traits.append(value["lifetime"])
            return "dyn " + " + ".join(traits)
        if kind == "qualified_path":
            trait = value.get("trait")
            self_type = self.ty(value["self_type"])
            prefix = f"<{self_type} as {self.path(trait)}>" if trait else self_type
            return f"{prefix}::{value['name']}{self.generic_args(value.get('args'))}"
        if kind == "function_pointer":
            sig = value["sig"]
            inputs = ", ".join(self.ty(t) for _, t in sig["inputs"])
            output = f" -> {self.ty(sig['output'])}" if sig.get("output") else ""
            return f"{self.hrtb(value.get('generic_params'))}fn({inputs}){output}"
        if kind == "pat":
            return self.ty(value["type"])
        return "_"

    def generics(self, generics, skip_synthetic=True):
        params = []
        for param in generics["params"]:
            kind = param["kind"]
            if "lifetime" in kind:
                outlives = kind["lifetime"]["outlives"]
                params.append(param["name"] + (": " + " + ".join(outlives) if outlives else ""))
            elif "type" in kind:
                if kind["type"].get("is_synthetic") and skip_synthetic:
                    continue
                bounds = self.bounds(kind["type"]["bounds"])
                default = kind["type"].get("default")
                params.append(
                    param["name"]
                    + (f": {bounds}" if bounds else "")
                    + (f" = {self.ty(default)}" if default else "")
                )
            elif "const" in kind:
                params.append(f"const {param['name']}: {self.ty(kind['const']['type'])}")
        return "<" + ", ".join(params) + ">" if params else ""

    def where_clause(self, generics):
        predicates = []
        for predicate in generics["where_predicates"]:
            if "bound_predicate" in predicate:
                bp = predicate["bound_predicate"]
                predicates.append(
                    self.hrtb(bp.get("generic_params"))
                    + f"{self.ty(bp['type'])}: {self.bounds(bp['bounds'])}"
                )
            elif "lifetime_predicate" in predicate:
                lp = predicate["lifetime_predicate"]
                predicates.append(f"{lp['lifetime']}: " + " + ".join(lp["outlives"]))
            elif "eq_predicate" in predicate:
                ep = predicate["eq_predicate"]
                rhs = ep["rhs"]
                value = self.ty(rhs["type"]) if "type" in rhs else rhs["constant"].get("expr", "_")
                predicates.append(f"{self.ty(ep['lhs'])} = {value}")
        return " where " + ", ".join(predicates) if predicates else ""

    # ---- items ----

    @staticmethod
    def non_exhaustive(item):
        return any(
            attr == "non_exhaustive" or (isinstance(attr, dict) and "non_exhaustive" in attr)
            or (isinstance(attr, str) and "non_exhaustive" in attr)
            for attr in item.get("attrs", [])
        )

    def signature(self, name, function, in_impl):
        header = function["header"]
        qualifiers = "".join(
            word
            for flag, word in (("is_const", "const "), ("is_async", "async "), ("is_unsafe", "unsafe "))
            if header.get(flag)
        )
        abi = header.get("abi", "Rust")
        if abi != "Rust":
            qualifiers += f'extern "{abi if isinstance(abi, str) else next(iter(abi))}" '
        params = []
        for index, (param_name, param_type) in enumerate(function["sig"]["inputs"]):
            if in_impl and index == 0 and param_name == "self":
                params.append(self.self_param(param_type))
            else:
                params.append(self.ty(param_type))
        output = function["sig"].get("output")
        returns = f" -> {self.ty(output)}" if output is not None else ""
        generics = function["generics"]
        return (
            f"{qualifiers}fn {name}{self.generics(generics)}({', '.join(params)}){returns}"
            + self.where_clause(generics)
        )

    def self_param(self, ty):
        if ty == {"generic": "Self"}:
            return "self"
        if "borrowed_ref" in ty and ty["borrowed_ref"]["type"] == {"generic": "Self"}:
            ref = ty["borrowed_ref"]
            lifetime = ref["lifetime"] + " " if ref.get("lifetime") else ""
            return f"&{lifetime}{'mut ' if ref['is_mutable'] else ''}self"
        return "self: " + self.ty(ty)

    def fields(self, field_ids):
        out = []
        for field_id in field_ids:
            field = self.item(field_id)
            if field is None:
                continue
            out.append(f"pub {field['name']}: {self.ty(field['inner']['struct_field'])}")
        return out

    def tuple_fields(self, field_ids):
        return ", ".join(
            "_" if field_id is None else self.ty(self.item(field_id)["inner"]["struct_field"])
            for field_id in field_ids
        )

    def variant(self, variant):
        kind = variant["inner"]["variant"]["kind"]
        if kind == "plain":
            return variant["name"]
        if "tuple" in kind:
            return f"{variant['name']}({self.tuple_fields(kind['tuple'])})"
        fields = self.fields(kind["struct"]["fields"])
        if kind["struct"]["has_stripped_fields"]:
            fields.append("..")
        return f"{variant['name']} {{ {', '.join(f.removeprefix('pub ') for f in fields)} }}"

    def name_items(self, module_id, prefix, seen):
        """Give every item reachable from the root the path a user writes (the first found)."""
        for item_id in self.item(module_id)["inner"]["module"]["items"]:
            item = self.item(item_id)
            if item is None or item.get("visibility") != "public":
                continue
            inner = item["inner"]
            if "use" in inner:
                use = inner["use"]
                if use["is_glob"]:
                    target = self.item(use["id"]) if use["id"] is not None else None
                    if target is not None and "module" in target["inner"]:
                        self.name_items(use["id"], prefix, seen)
                    continue
                if use["id"] is not None:
                    self.public_path.setdefault(use["id"], f"{prefix}::{use['name']}")
                    target = self.item(use["id"])
                    if target is not None and "module" in target["inner"] and use["id"] not in seen:
                        seen.add(use["id"])
                        self.name_items(use["id"], f"{prefix}::{use['name']}", seen)
            elif item.get("name"):
                self.public_path.setdefault(item_id, f"{prefix}::{item['name']}")
                if "module" in inner and item_id not in seen:
                    seen.add(item_id)
                    self.name_items(item_id, f"{prefix}::{item['name']}", seen)

    def walk(self, module_id, prefix, seen):
        for item_id in self.item(module_id)["inner"]["module"]["items"]:
            item = self.item(item_id)
            if item is None or item.get("visibility") != "public":
                continue
            inner = item["inner"]
            if "use" in inner:
                use = inner["use"]
                target = self.item(use["id"]) if use["id"] is not None else None
                if use["is_glob"]:
                    if target is not None and "module" in target["inner"]:
                        self.walk(use["id"], prefix, seen)
                    else:
                        self.lines.add(f"pub use {prefix}::* from {use['source']}")
                elif target is None:
                    # Defined in another crate: its own API is that crate's, its name is ours.
                    summary = self.paths.get(str(use["id"])) if use["id"] is not None else None
                    kind = summary["kind"] if summary else "item"
                    self.lines.add(f"pub use {prefix}::{use['name']} ({kind} of another crate)")
                else:
                    self.emit(use["id"], target, f"{prefix}::{use['name']}", seen)
            elif item.get("name"):
                self.emit(item_id, item, f"{prefix}::{item['name']}", seen)

    def emit(self, item_id, item, path, seen):
        if item_id in seen and "module" in item["inner"]:
            return
        seen.add(item_id)
        (kind, inner), = item["inner"].items()
        if kind == "module":
            self.lines.add(f"pub mod {path}")
            self.walk(item_id, path, seen)
        elif kind == "function":
            self.lines.add(f"pub {self.signature(path, inner, False)}")
        elif kind == "constant":
            self.lines.add(f"pub const {path}: {self.ty(inner['type'])}")
        elif kind == "static":
            mutable = "mut " if inner.get("is_mutable") else ""
            self.lines.add(f"pub static {mutable}{path}: {self.ty(inner['type'])}")
        elif kind == "type_alias":
            generics = self.generics(inner["generics"])
            self.lines.add(f"pub type {path}{generics} = {self.ty(inner['type'])}")
        elif kind == "struct":
            self.struct(path, item, inner)
        elif kind == "enum":
            self.enum(path, item, inner)
        elif kind == "union":
            self.lines.add(f"pub union {path}{self.generics(inner['generics'])}")
            self.impls(path, inner["impls"])
        elif kind == "trait":
            self.trait(path, item, inner)
        elif kind == "macro":
            self.lines.add(f"pub macro {path}!")
        else:
            self.lines.add(f"pub {kind} {path}")

    def struct(self, path, item, inner):
        generics = self.generics(inner["generics"]) + self.where_clause(inner["generics"])
        attrs = "#[non_exhaustive] " if self.non_exhaustive(item) else ""
        kind = inner["kind"]
        if kind == "unit":
            self.lines.add(f"pub {attrs}struct {path}{generics}")
        elif "tuple" in kind:
            self.lines.add(f"pub {attrs}struct {path}{generics}({self.tuple_fields(kind['tuple'])})")
        else:
            fields = self.fields(kind["plain"]["fields"])
            if attrs or kind["plain"]["has_stripped_fields"]:
                self.lines.add(f"pub {attrs}struct {path}{generics} {{ .. }}")
                for field in fields:
                    self.lines.add(f"pub field {path}::{field.removeprefix('pub ')}")
            else:
                self.lines.add(f"pub struct {path}{generics} {{ {', '.join(fields)} }}")
        self.impls(path, inner["impls"])

    def enum(self, path, item, inner):
        generics = self.generics(inner["generics"]) + self.where_clause(inner["generics"])
        variants = [self.variant(self.item(v)) for v in inner["variants"]]
        if self.non_exhaustive(item) or inner["has_stripped_variants"]:
            self.lines.add(f"pub #[non_exhaustive] enum {path}{generics} {{ .. }}")
            for variant in variants:
                self.lines.add(f"pub variant {path}::{variant}")
        else:
            self.lines.add(f"pub enum {path}{generics} {{ {', '.join(variants)} }}")
        self.impls(path, inner["impls"])

    def trait(self, path, item, inner):
        generics = self.generics(inner["generics"]) + self.where_clause(inner["generics"])
        qualifiers = ("unsafe " if inner.get("is_unsafe") else "") + ("auto " if inner.get("is_auto") else "")
        supertraits = self.bounds(inner.get("bounds", []))
        sealed = " (not object safe)" if not inner.get("is_dyn_compatible", True) else ""
        self.lines.add(f"pub {qualifiers}trait {path}{generics}" + (f": {supertraits}" if supertraits else "") + sealed)
        for member_id in inner["items"]:
            member = self.item(member_id)
            if member is None:
                continue
            (kind, value), = member["inner"].items()
            name = f"{path}::{member['name']}"
            if kind == "function":
                provided = " (provided)" if value.get("has_body") else ""
                self.lines.add(f"trait {self.signature(name, value, True)}{provided}")
            elif kind == "assoc_type":
                self.lines.add(f"trait type {name}: {self.bounds(value.get('bounds', []))}")
            elif kind == "assoc_const":
                self.lines.add(f"trait const {name}: {self.ty(value['type'])}")

    def impls(self, path, impl_ids):
        for impl_id in impl_ids:
            impl = self.item(impl_id)
            if impl is None:
                continue
            inner = impl["inner"]["impl"]
            if inner.get("blanket_impl") is not None:
                continue
            generics = self.generics(inner["generics"])
            where = self.where_clause(inner["generics"])
            if inner["trait"] is not None:
                if self.type_path(inner["trait"].get("id"), "") in UNSTABLE_MARKERS:
                    continue
                negative = "!" if inner.get("is_negative") else ""
                unsafe = "unsafe " if inner.get("is_unsafe") else ""
                # What an implementation fixes (Deref's Target, Iterator's Item) is part of it.
                assoc = []
                for member_id in inner["items"]:
                    member = self.item(member_id)
                    if member is not None and "assoc_type" in member["inner"]:
                        value = member["inner"]["assoc_type"].get("type")
                        if value is not None:
                            assoc.append(f"type {member['name']} = {self.ty(value)}")
                body = " { " + "; ".join(sorted(assoc)) + " }" if assoc else ""
                self.lines.add(
                    f"{unsafe}impl{generics} {negative}{self.path(inner['trait'])} for {self.ty(inner['for'])}{where}{body}"
                )
                continue
            for member_id in inner["items"]:
                member = self.item(member_id)
                if member is None or member.get("visibility") != "public":
                    continue
                (kind, value), = member["inner"].items()
                name = f"{path}::{member['name']}"
                typed = any("lifetime" not in p["kind"] for p in inner["generics"]["params"])
                context = f"impl{generics} " if typed or where else ""
                if kind == "function":
                    self.lines.add(f"{context}pub {self.signature(name, value, True)}{where}")
                elif kind == "assoc_const":
                    self.lines.add(f"{context}pub const {name}: {self.ty(value['type'])}")


def breaking(old_version, new_version):
    """Whether going from one version to the other may break users (Cargo's semver rules)."""
    old = [int(part) for part in old_version.split("-")[0].split(".")]
    new = [int(part) for part in new_version.split("-")[0].split(".")]
    if old[0] > 0:
        return new[0] > old[0]
    if old[1] > 0:
        return new[:2] > old[:2]
    return new > old


def next_breaking(version):
    """The first version after `version` that may break it."""
    major, minor, _ = (int(part) for part in version.split("-")[0].split("."))
    if major > 0:
        return f"{major + 1}.0.0"
    return f"0.{minor + 1}.0"


def item_name(line):
    """The SDK path a line is about (`Guard::observe`), as a changelog names it."""
    start = line.index("kvlint_sdk::") + len("kvlint_sdk::")
    return re.match(r"\w+(?:::\w+)*", line[start:]).group(0)


def changelog_section(changelog, version):
    """The text under `## [version]` in a Keep a Changelog file, up to the next release."""
    section, inside = [], False
    for line in changelog.splitlines():
        if line.startswith("## "):
            inside = line.startswith(f"## [{version}]")
        elif inside:
            section.append(line)
    return "\n".join(section)


def check(snapshot_path, current_path, version, changelog_path, bless):
    crate = "kvlint-sdk"
    with open(current_path, encoding="utf-8") as file:
        current = sorted(line for line in file.read().splitlines() if line)
    try:
        with open(snapshot_path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except FileNotFoundError:
        lines = []
    header = lines[0] if lines and lines[0].startswith("#") else ""
    match = re.match(r"# \S+ ([0-9][^:\s]*)", header)
    recorded_version = match.group(1) if match else version
    recorded = [line for line in lines if line and not line.startswith("#")]
    gone = set(recorded) - set(current)
    # A negative auto trait implementation going (`impl !UnwindSafe for X`) is X gaining the
    # trait: an addition, not a break.
    lost_negatives = {line for line in gone if NEGATIVE_IMPL.match(line)}
    removed = sorted(gone - lost_negatives)
    added = sorted(set(current) - set(recorded))
    how = "scripts/semver-check.sh --bless"

    def write():
        with open(snapshot_path, "w", encoding="utf-8") as file:
            file.write(f"# {crate} {version}: its public API, one item a line ({how} writes it)\n")
            file.write("\n".join(current) + "\n")
        print(f"{crate} public API: {len(current)} items written to {snapshot_path} ({version})")

    if not lines and bless:
        write()
        return 0
    if not gone and not added:
        if bless and recorded_version != version:
            write()
            return 0
        print(f"{crate} public API: unchanged, {len(current)} items ({snapshot_path}, {version})")
        return 0
    for line in removed:
        print(f"- {line}")
    for line in sorted(lost_negatives):
        print(f"- {line}")
    for line in added:
        print(f"+ {line}")
    if removed:
        names = sorted({item_name(line) for line in removed if "kvlint_sdk::" in line})
        bumped = breaking(recorded_version, version)
        section = ""
        try:
            with open(changelog_path, encoding="utf-8") as file:
                section = changelog_section(file.read(), version)
        except FileNotFoundError:
            pass
        unrecorded = [name for name in names if name not in section]
        if not bumped or not section or unrecorded:
            print(
                f"\nerror: {crate}'s public API breaks: {len(removed)} item(s) above were removed or "
                f"changed (lines starting with -) against {snapshot_path} ({crate} {recorded_version}).\n"
                f"A break that is meant needs, before {how}:\n"
                f"  1. a new version of {crate} that semver allows to break "
                f"({recorded_version} -> {next_breaking(recorded_version)} or later; the SDK takes the "
                f"workspace's version, [workspace.package] in Cargo.toml)"
                + (" -- still " + version if not bumped else "")
                + ";\n"
                f"  2. a section '## [<that version>]' in CHANGELOG.md that names every break "
                f"(under ### Changed or ### Removed): "
                + (", ".join(unrecorded or names))
                + (" not named there yet" if section and unrecorded else "")
                + ".\n"
                "A break that is not meant: restore the items (an SDK user's code must still compile; "
                "sdk/tests/api_compat.rs is such a program).",
                file=sys.stderr,
            )
            return 1
    if bless:
        write()
        return 0
    if removed:
        print(
            f"\nerror: {crate}'s public API changed (a break, recorded for {version} in CHANGELOG.md): "
            f"run {how} to update {snapshot_path}.",
            file=sys.stderr,
        )
    else:
        print(
            f"\nerror: {crate}'s public API grew ({len(added)} line(s) starting with +; no break, "
            f"no new version needed): name the additions in CHANGELOG.md under "
            f"'## [Unreleased]' / '### Added', then run {how} to record them in {snapshot_path}.",
            file=sys.stderr,
        )
    return 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "list":
        with open(sys.argv[2], encoding="utf-8") as file:
            doc = json.load(file)
        api = Api(doc)
        root = doc["root"]
        api.name_items(root, api.crate, {root})
        api.walk(root, api.crate, {root})
        for line in sorted(api.lines):
            print(line)
        return 0
    if len(sys.argv) in (6, 7) and sys.argv[1] == "check":
        bless = sys.argv[6:] == ["--bless"]
        return check(*sys.argv[2:6], bless)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
