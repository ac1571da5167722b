#!/usr/bin/env python3
"""Checks that the Spack recipe and the CMake build offer the same features.

    spack_variants.py <source dir>              compare, exit 1 on any difference
    spack_variants.py <source dir> --self-test  prove the comparison catches drift

The CMake side is every accelerate_feature(<NAME> "...") call in the top-level
CMakeLists.txt and cmake/*.cmake. The Spack side is spack/packages/accelerate-hpc/
package.py, read with Python's ast (Spack is not needed). They agree when:
  - each feature NAME has a variant "name" and each variant has a feature;
  - each variant is passed on exactly once, as
    define_from_variant("ACCELERATE_WITH_NAME", "name");
  - each variant pulls in a dependency when on (depends_on(..., when="+name")).
"""
import ast
import pathlib
import re
import sys

FEATURE_CALL = re.compile(r'^\s*accelerate_feature\(\s*([A-Za-z0-9_]+)\s', re.MULTILINE)
COMMENT = re.compile(r'#[^\n]*')


def cmake_features(source_dir):
    files = [source_dir / "CMakeLists.txt"] + sorted((source_dir / "cmake").glob("*.cmake"))
    features = []
    for path in files:
        text = COMMENT.sub("", path.read_text())
        features += FEATURE_CALL.findall(text)
    return features


def _string_args(call):
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def _keyword(call, name):
    for kw in call.keywords:
        if kw.arg == name and isinstance(kw.value, ast.Constant):
            return kw.value.value
    return None


def recipe_facts(package_source):
    """(variants, define_from_variant pairs, 'when' conditions of depends_on)."""
    tree = ast.parse(package_source)
    variants, defines, depends_when = [], [], []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        args = _string_args(node)
        if name == "variant" and args:
            variants.append(args[0])
        elif name == "define_from_variant" and len(args) >= 2:
            defines.append((args[0], args[1]))
        elif name == "depends_on":
            when = _keyword(node, "when")
            if when:
                depends_when.append(when)
    return variants, defines, depends_when


def differences(features, package_source):
    variants, defines, depends_when = recipe_facts(package_source)
    problems = []
    for dup in sorted({f for f in features if features.count(f) > 1}):
        problems.append(f"accelerate_feature({dup}) is declared twice in CMake")
    for name in sorted(set(features)):
        if name.lower() not in variants:
            problems.append(f"CMake feature {name} (ACCELERATE_WITH_{name}) has no Spack variant '{name.lower()}'")
    for variant in variants:
        if variant.upper() not in features:
            problems.append(f"Spack variant '{variant}' has no CMake feature ACCELERATE_WITH_{variant.upper()}")
        mapped = [d for d in defines if d[1] == variant]
        expected = (f"ACCELERATE_WITH_{variant.upper()}", variant)
        if mapped != [expected]:
            problems.append(f"variant '{variant}' must be passed once as define_from_variant"
                            f"(\"{expected[0]}\", \"{variant}\"); found {mapped or 'nothing'}")
        if not any(re.search(rf"(^|\s)\+{re.escape(variant)}\b", w) for w in depends_when):
            problems.append(f"variant '{variant}' adds no dependency (no depends_on(..., when=\"+{variant}\"))")
    for option, variant in defines:
        if option.startswith("ACCELERATE_WITH_") and option[len("ACCELERATE_WITH_"):] not in features:
            problems.append(f"define_from_variant(\"{option}\", \"{variant}\") sets an option CMake does not declare")
    return problems


def self_test(features, package_source):
    """Each mutation must be reported; the unmodified inputs must not be."""
    assert not differences(features, package_source), "the real inputs already differ"
    first = features[0].lower()
    mutations = {
        "variant removed": (features, re.sub(rf'\n\s*variant\("{first}",[^\n]*', "\n", package_source, count=1)),
        "define removed": (features, re.sub(rf'\n[^\n]*define_from_variant\("ACCELERATE_WITH_{first.upper()}"[^\n]*',
                                            "\n", package_source, count=1)),
        "feature added in CMake": (features + ["MAGIC"], package_source),
        "feature removed from CMake": (features[1:], package_source),
        "wrong option name": (features, package_source.replace(f'"ACCELERATE_WITH_{first.upper()}"',
                                                               f'"ACCELERATE_USE_{first.upper()}"', 1)),
    }
    failed = []
    for label, (f, src) in mutations.items():
        if src == package_source and f == features:
            failed.append(f"{label}: the mutation did not apply (test out of date)")
        elif not differences(f, src):
            failed.append(f"{label}: not detected")
    return failed


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    source_dir = pathlib.Path(argv[1])
    features = cmake_features(source_dir)
    package_source = (source_dir / "spack" / "packages" / "accelerate-hpc" / "package.py").read_text()
    if not features:
        print("no accelerate_feature(...) call found in CMake: the parser is out of date")
        return 1
    if "--self-test" in argv[2:]:
        failed = self_test(features, package_source)
        for line in failed:
            print("SELF-TEST FAILED:", line)
        print("self-test:", "ok" if not failed else f"{len(failed)} failure(s)")
        return 1 if failed else 0
    problems = differences(features, package_source)
    variants = recipe_facts(package_source)[0]
    print("CMake features:", ", ".join(features))
    print("Spack variants:", ", ".join(variants))
    for p in problems:
        print("MISMATCH:", p)
    print("agree" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
