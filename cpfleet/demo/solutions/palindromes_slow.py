import sys

lines = sys.stdin.read().split()
for s in lines[1:1 + int(lines[0])]:
    # longest palindromic substring by expanding around every center: O(n^2)
    n = len(s)
    best = 0
    for c in range(2 * n - 1):
        lo, hi = c // 2, (c + 1) // 2
        while lo >= 0 and hi < n and s[lo] == s[hi]:
            lo -= 1
            hi += 1
        best = max(best, hi - lo - 1)
    print('YES' if best == n else 'NO')
