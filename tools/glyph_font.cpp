#include "glyph_font.h"

#include "glyph_font_data.h"

namespace tandem::tools {

int glyph_width() { return glyphs::kWidth; }
int glyph_height() { return glyphs::kHeight; }

void draw_text(uint8_t* rgb, int width, int height, int x, int y, const std::string& text, int max_chars, uint8_t r,
               uint8_t g, uint8_t b) {
  std::string t = text;
  if (max_chars >= 2 && static_cast<int>(t.size()) > max_chars) t = t.substr(0, static_cast<size_t>(max_chars - 2)) + "..";
  for (size_t i = 0; i < t.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    const int g_index = c >= 32 && c < 127 ? c - 32 : '?' - 32;
    const int x0 = x + static_cast<int>(i) * glyphs::kWidth;
    for (int gy = 0; gy < glyphs::kHeight; ++gy) {
      const int py = y + gy;
      if (py < 0 || py >= height) continue;
      const uint16_t bits = glyphs::kRows[g_index][gy];
      for (int gx = 0; gx < glyphs::kWidth; ++gx) {
        const int px = x0 + gx;
        if (!(bits >> gx & 1) || px < 0 || px >= width) continue;
        uint8_t* p = rgb + (static_cast<int64_t>(py) * width + px) * 3;
        p[0] = r;
        p[1] = g;
        p[2] = b;
      }
    }
  }
}

}  // namespace tandem::tools
