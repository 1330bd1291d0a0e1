"""Dream (REM synthesis): one dream journal entry per anima and day."""
