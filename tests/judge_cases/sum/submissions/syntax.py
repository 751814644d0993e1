print(1 +
