/* `gebpf sample --flamegraph FILE` (docs/sample.md "Flame graphs"): a
 * profile's stacks drawn as an interactive SVG flame graph, one file that
 * a browser opens on its own (no server, no network):
 *
 * - a frame per function per distinct path from the root ("all"), merged by
 *   name as --folded names them (the same names: demangled, JIT code from
 *   its perf map, Python functions), its width its samples, callers below
 *   their callees, siblings in name order (the same file for the same
 *   profile); a frame narrower than 0.1 pixel is left out (its samples are
 *   in its parent's width);
 * - a tooltip per frame: "NAME (N samples, P%)";
 * - a click zooms to a frame (its callers stay, dimmed, full width), "Reset
 *   Zoom" goes back; "Search" (or Ctrl-F) takes a regular expression, marks
 *   the matching frames and says what share of the samples they hold (each
 *   sample counted once however many matching frames it passes through);
 *   FILE.svg#s=REGEX opens with that search made (a link to a finding). 
 *
 * Colors: user code warm (red to yellow, by a hash of the name: the same
 * function has the same color in every graph), kernel frames ("_[k]")
 * orange-brown, JIT code named from a perf map and Python functions
 * aqua-green. */
#ifndef GB_SAMPLE_FLAME_H
#define GB_SAMPLE_FLAME_H

#include <stdio.h>

#include "sample/profile.h"

/* Write p's stacks to f as an SVG titled title (one line; escaped here).
 * 0, -ENOMEM, or -EIO when f could not be written. */
int gb_flame_write(const struct gb_profile *p, FILE *f, const char *title);

#endif
