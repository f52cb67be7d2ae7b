# src/data: see src/data/*.c
