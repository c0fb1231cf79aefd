"""Operations: the scheduler, upkeep after crashes, progress display."""
