"""Open a sandbox, reproduce a bug, fix it, run the test: what an agent does, in a dozen lines.

    python examples/sandbox_quickstart.py [docker|local]
"""

import asyncio
import sys

from verl_swe.sandbox import parse_sandbox_config, open_sandbox

BUGGY = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\nassert add(2, 2) == 4, f'add(2, 2) = {add(2, 2)}'\nprint('test passed')\n"


async def main(backend: str) -> None:
    async with open_sandbox(parse_sandbox_config({"backend": backend})) as sb:
        await sb.write_file("calc.py", BUGGY)
        await sb.write_file("test_calc.py", TEST)
        before = await sb.exec("python3 test_calc.py", timeout=60)
        await sb.exec("sed -i 's/a - b/a + b/' calc.py")
        after = await sb.exec("python3 test_calc.py", timeout=60)
        print(f"before the fix: exit {before.exit_code}; after: exit {after.exit_code}")
        print(after.output.strip().splitlines()[-1])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "docker"))
