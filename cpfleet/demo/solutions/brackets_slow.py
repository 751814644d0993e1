import sys

lines = sys.stdin.read().split()
for s in lines[1:1 + int(lines[0])]:
    # remove adjacent pairs until nothing changes: one pass per nesting level, O(n^2)
    s = list(s)
    changed = True
    while changed:
        changed = False
        out = []
        i = 0
        while i < len(s):
            if i + 1 < len(s) and s[i] + s[i + 1] in ('()', '[]', '{}'):
                i += 2
                changed = True
            else:
                out.append(s[i])
                i += 1
        s = out
    print('YES' if not s else 'NO')
