import unittest

from textkit.case import snake_case


class SnakeCaseTest(unittest.TestCase):
    def test_camel(self):
        self.assertEqual(snake_case("parseHttpHeader"), "parse_http_header")

    def test_already_snake(self):
        self.assertEqual(snake_case("already_snake"), "already_snake")


if __name__ == "__main__":
    unittest.main()
