"""scripts/benchmark_levers.py: how a variant is named on the command line."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts"))
import benchmark_levers  # noqa: E402  pylint: disable=wrong-import-position


def test_named_and_written_out_variants():
  assert benchmark_levers.parse_variant("no_bfc_allocator") == (
      "no_bfc_allocator", {"TF_CPU_ALLOCATOR_USE_BFC": "false"}, [])
  assert benchmark_levers.parse_variant("xla32=--use_xla_jit+--dtype=float32+A=1=2") == (
      "xla32", {"A": "1=2"}, ["--use_xla_jit", "--dtype=float32"])


@pytest.mark.parametrize("text,message", [("nonsense", "unknown variant 'nonsense'"),
                                          ("x=plain", "'plain' is neither")])
def test_bad_variants_are_one_line_errors(text, message):
  with pytest.raises(SystemExit, match=message):
    benchmark_levers.parse_variant(text)
