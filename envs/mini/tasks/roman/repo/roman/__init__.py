"""Roman numeral conversion."""

from .convert import MAX_VALUE, from_roman, to_roman
from .fmt import copyright_years, numbered

__all__ = ["MAX_VALUE", "copyright_years", "from_roman", "numbered", "to_roman"]
