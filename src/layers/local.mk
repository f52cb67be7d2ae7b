# src/layers: see src/layers/*.c
