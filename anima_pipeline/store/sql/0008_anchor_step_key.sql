-- Light sleep's stage 2 is the step `emotional_anchors/marked` (it was
-- `emotional_anchors/extracted`: two nodes of the Dagster asset graph, which shows the last
-- part of a key, both read "extracted"). Its recorded steps and audit rows follow it, so a
-- store that slept before keeps its nights done and its history readable.
UPDATE sleep_state SET step = 'emotional_anchors/marked' WHERE step = 'emotional_anchors/extracted';
UPDATE memory_event SET step = 'emotional_anchors/marked' WHERE step = 'emotional_anchors/extracted';
