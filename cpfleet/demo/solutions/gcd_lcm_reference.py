import sys
from math import gcd

data = sys.stdin.read().split()
for i in range(int(data[0])):
    a, b = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    g = gcd(a, b)
    print(g, a // g * b)
