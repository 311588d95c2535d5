"""The generated config reference matches the declarations in the code."""

import os

from open_seq2seq.utils.reference import config_reference, public_components

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_reference_is_up_to_date():
  with open(os.path.join(ROOT, "docs", "config_reference.md"), encoding="utf-8") as f:
    assert f.read() == config_reference(), "run: python scripts/gen_config_reference.py"


def test_every_declared_key_has_a_description():
  for classes in public_components().values():
    for klass in classes:
      for key, param in klass.declared_params().items():
        assert param.doc, f"{klass.__name__}.{key} has no description"
