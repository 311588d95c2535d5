"""The generated config reference matches the declarations in the code."""

import os

from open_seq2seq import slots
from open_seq2seq.optimizers import lr_policies
from open_seq2seq.training.run_params import GROUPS, RUN_PARAMS
from open_seq2seq.utils.params import param_rows
from open_seq2seq.reference import config_reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_reference_is_up_to_date():
  with open(os.path.join(ROOT, "docs", "config_reference.md"), encoding="utf-8") as f:
    assert f.read() == config_reference(), "run: python scripts/gen_config_reference.py"


def documented_tables():
  """(where, declarations) of every table the reference shows."""
  for title, declared in GROUPS.items():
    yield f"run settings: {title}", declared
  for choice in slots.package_choices("models"):
    yield choice.title, choice.value.declared_params()
  for slot in slots.SLOTS:
    for choice in slot.catalog():
      yield f"{slot.name} {choice.title}", slot.declarations(choice.value) or {}


def test_every_documented_key_has_a_description():
  for where, declared in documented_tables():
    for path, param in param_rows(declared):  # nested keys included
      assert param.doc, f"{where}: {path} has no description"


def test_every_slot_has_a_section_listing_its_choices():
  text = config_reference()
  for slot in slots.SLOTS:
    assert f"(`{slot.name}`, `{slot.params_key}`)" in text
    assert slot.catalog(), f"{slot.name} documents no choice"
    for choice in slot.catalog():
      assert f"### `{choice.title}`" in text


def test_lr_policy_section_lists_the_policies_and_no_helper():
  text = config_reference()
  section = text[text.index("## Learning-rate policies"):]
  section = section[:section.index("\n## ", 1)]
  titles = [line[5:-1] for line in section.splitlines() if line.startswith("### ")]
  assert titles == list(lr_policies.POLICIES)
  for helper in ("complete_lr_policy_params", "policy_declarations", "LRPolicySchedule"):
    assert helper not in section


def test_nested_keys_are_listed_with_their_paths():
  text = config_reference()
  assert "| `convnet_layers/<i>/kernel_size` | list of 1 int >= 1 ([k]; [k, 1] for conv2d) | **required** |" in text
  assert "| `conv_layers/<i>/stride` | list of 2 ints >= 1 | `[1, 1]` |" in text
  assert "| `augmentation/n_freq_mask` | non-negative int | `0` |" in text
  assert "| `step_window` | int | `2000` |" in text  # Backoff's loss_scaling_params


def test_the_run_keys_are_documented_once_and_no_table_repeats():
  text = config_reference()
  top_level = text[:text.index("## Data layers")]  # run and model keys
  for key in RUN_PARAMS:
    assert top_level.count(f"| `{key}` |") == 1, key
  tables = [block for block in text.split("\n\n") if block.startswith("| key |")]
  repeated = {table.splitlines()[2] for table in tables if tables.count(table) > 1}
  assert not repeated, f"tables repeated in the reference, first rows: {sorted(repeated)}"
