"""Tests for the output budget (runbox_tools/output_budget.py): the character cut and the spill.

Run from deploy/sandbox/agent:  python3 -m unittest discover -s tests -t .
"""
import os
import shutil
import tempfile
import unittest
from unittest import mock

import runbox_agent
from runbox_tools.output_budget import encoded_size, fit_output


class OutputBudgetTest(unittest.TestCase):
    def setUp(self):
        self.ws = os.path.realpath(tempfile.mkdtemp(prefix="runbox-budget-test-"))
        patcher = mock.patch.dict(os.environ, {"RUNBOX_WORKSPACE": self.ws})
        patcher.start()
        self.addCleanup(patcher.stop)
        self.addCleanup(shutil.rmtree, self.ws, True)

    def fit(self, output, **args):
        return fit_output({"output": output, "metadata": {}, "is_error": False}, args, "run_1:call 2")

    def test_leaves_output_within_both_budgets_alone(self):
        result = self.fit("é" * 100, max_output_chars=100, max_output_bytes=1000)
        self.assertEqual(result["output"], "é" * 100)
        self.assertNotIn("output_spilled_to", result["metadata"])

    def test_cuts_to_the_character_budget_and_counts_the_cut_exactly(self):
        result = self.fit("a" * 5000, max_output_chars=1000)
        self.assertEqual(result["output"], "a" * 1000 + "\n… 4000 characters cut (max_output_chars=1000)")

    def test_keeps_the_tools_closing_notes_whole_through_a_cut(self):
        text = "header\n\n" + "x" * 5000 + "\n… 1 more line (use offset=2 to continue)"
        result = self.fit(text, max_output_chars=1000)
        notes = "\n… 1 more line (use offset=2 to continue)"
        self.assertTrue(result["output"].endswith(notes))
        shown = result["output"][: -len(notes)]
        head, cut_note = shown.rsplit("\n", 1)
        self.assertEqual(len(head) + len(notes), 1000)
        self.assertEqual(cut_note, "… %d characters cut (max_output_chars=1000)" % (len(text) - len(notes) - len(head)))
        self.assertTrue(text.startswith(head))

    def test_does_not_take_content_for_notes(self):
        # A long last line starting with "… " is content, and is cut like any other.
        text = "a" * 2000 + "\n… " + "b" * 2000
        result = self.fit(text, max_output_chars=1000)
        self.assertEqual(result["output"], "a" * 1000 + "\n… %d characters cut (max_output_chars=1000)" % (len(text) - 1000))

    def test_spills_output_over_the_byte_budget_whole_and_keeps_a_head_that_fits(self):
        text = "".join("line %d é\n" % i for i in range(50000))
        result = self.fit(text, max_output_chars=1_000_000, max_output_bytes=64 * 1024)
        where = result["metadata"]["output_spilled_to"]
        self.assertRegex(where, r"^\.runbox/outputs/run_1_call_2-[0-9a-f]{6}\.txt$")
        with open(os.path.join(self.ws, where), encoding="utf-8") as f:
            self.assertEqual(f.read(), text)
        self.assertLessEqual(encoded_size(result["output"]), 64 * 1024)
        head, note = result["output"].rsplit("\n… ", 1)
        self.assertTrue(text.startswith(head))
        self.assertTrue(head.endswith("\n"), "the head ends at a line break")
        self.assertIn("the output is %d bytes, over the 65536-byte limit for one result" % len(text.encode()), note)
        self.assertIn(where, note)

    def test_counts_json_escapes_against_the_byte_budget(self):
        # Control characters take six bytes each as JSON: the head must still fit.
        result = self.fit("\x01" * 50000, max_output_chars=1_000_000, max_output_bytes=20000)
        self.assertLessEqual(encoded_size(result["output"]), 20000)
        self.assertIn("output_spilled_to", result["metadata"])

    def test_says_so_when_the_spill_cannot_be_written(self):
        os.makedirs(os.path.join(self.ws, ".runbox"))
        with open(os.path.join(self.ws, ".runbox", "outputs"), "w") as f:
            f.write("a file where the folder should be")
        result = self.fit("x" * 50000, max_output_chars=1_000_000, max_output_bytes=10000)
        self.assertIsNone(result["metadata"]["output_spilled_to"])
        self.assertIn("the rest could not be saved", result["output"])
        self.assertLessEqual(encoded_size(result["output"]), 10000)

    def test_the_agent_applies_it_to_every_op(self):
        reply = runbox_agent.handle({"id": "c1", "op": "ping", "args": {"max_output_chars": 2}})
        self.assertEqual(reply["result"]["output"], "po\n… 2 characters cut (max_output_chars=2)")


if __name__ == "__main__":
    unittest.main()
