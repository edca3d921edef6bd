//! Output: maps, histograms and events as text or JSON lines, behind one interface.
