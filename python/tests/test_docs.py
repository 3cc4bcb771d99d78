"""The Python examples of README.md and docs/*.md, run as written.

A Python block marked ``<!-- doc-test: python -->`` (docs/testing.md) is run here, in the
folder of the TVM-compiled conformance models, whose resnet/ holds the files the pages
name (model.so, lib.so, graph.json, params.bin). tests/docs/check_docs.py, the ctest
``docs``, sees to it that every other block is run or marked."""

import importlib.util
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _blocks():
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "tests" / "docs" / "check_docs.py")
    check_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_docs)
    pages = ["README.md"] + sorted("docs/" + p.name for p in (ROOT / "docs").glob("*.md"))
    return [b for page in pages for b in check_docs.read_blocks(str(ROOT), page) if b.marker == "python"]


BLOCKS = _blocks()


def test_the_pages_have_python_blocks_to_run():
    assert len(BLOCKS) >= 3, [b.where() for b in BLOCKS]
    assert all(b.lang == "python" for b in BLOCKS), [(b.where(), b.lang) for b in BLOCKS if b.lang != "python"]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where() for b in BLOCKS])
def test_doc_block_runs(block, conformance_dir, monkeypatch):
    if not (conformance_dir / "resnet" / "model.so").is_file():
        pytest.skip("no resnet among the conformance models in %s" % conformance_dir)
    monkeypatch.chdir(conformance_dir)
    code = compile("\n" * (block.line) + block.text, str(ROOT / block.path), "exec")
    exec(code, {"__name__": "doc_block"})
