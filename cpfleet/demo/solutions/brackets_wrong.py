import sys

lines = sys.stdin.read().split()
for s in lines[1:1 + int(lines[0])]:
    depth = 0
    ok = True
    for c in s:
        depth += 1 if c in '([{' else -1
        if depth < 0:
            ok = False
    print('YES' if ok and depth == 0 else 'NO')
