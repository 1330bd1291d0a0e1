"""Light sleep: the day's conversations into semantic memories, emotional anchors,
autobiographical narratives and the autobiography summary."""
