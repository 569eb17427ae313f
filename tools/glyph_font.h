// Text for pictures: draws printable ASCII with a small bitmap font (DejaVu Sans Mono 11 px,
// tools/glyph_font_data.h) into an RGB u8 [H, W, 3] image. Other characters draw as '?'.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::tools {

/// Pixel size of one character cell.
int glyph_width();
int glyph_height();

/// Draws `text` with its top-left corner at (x, y) in `rgb` (`width` x `height` pixels), in
/// colour (r, g, b), clipped to the image and to `max_chars` characters (a longer text ends in
/// "..").
void draw_text(uint8_t* rgb, int width, int height, int x, int y, const std::string& text, int max_chars, uint8_t r,
               uint8_t g, uint8_t b);

}  // namespace tandem::tools
