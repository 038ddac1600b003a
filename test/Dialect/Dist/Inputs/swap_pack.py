"""Swaps the first two operands of the first dist.pack whose first two
pieces have one type (a layer norm's weight and bias gradients): reads the
IR from argv[1], writes it to stdout; exits 1 where no pack has them."""

import re
import sys

PACK = re.compile(r"dist\.pack (%[\w#]+), (%[\w#]+)(.*?) : ([^,]+), ([^,]+),")

text = open(sys.argv[1]).read()
for match in PACK.finditer(text):
    first, second, rest, type0, type1 = match.groups()
    if type0 == type1:
        swapped = "dist.pack %s, %s%s : %s, %s," % (second, first, rest,
                                                    type0, type1)
        sys.stdout.write(text[:match.start()] + swapped +
                         text[match.end():])
        sys.exit(0)
sys.exit(1)
