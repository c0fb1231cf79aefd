"""Operations: the scheduler, progress display, coverage of rolling-window sources, the offline check."""
