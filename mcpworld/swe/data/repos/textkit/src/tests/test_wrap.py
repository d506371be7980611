import unittest

from textkit.wrap import truncate


class TruncateTest(unittest.TestCase):
    def test_short_text_unchanged(self):
        self.assertEqual(truncate("hello", 10), "hello")

    def test_rejects_tiny_width(self):
        with self.assertRaises(ValueError):
            truncate("hello", 2)


if __name__ == "__main__":
    unittest.main()
