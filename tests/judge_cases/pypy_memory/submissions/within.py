n = int(input())
block = bytearray(n << 20)
print(len(block) >> 20)
