// Range checks for numeric command-line options. CLI11's own Range reads "-1" into an unsigned
// option as 2^64-1 before comparing, and prints bounds of doubles as 1.000000; these read the
// text strictly and answer "--seed: must be a whole number 0-9000000000000000, not '-1'".
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace ttemu::launcher {

// A whole number in [lo, hi], written as digits with an optional '-': no sign for unsigned
// options, no fraction, no exponent, nothing after it, nothing that overflows T, no leading
// zero (CLI11 converts with base 0: "010" would be 8; check() cannot rewrite the text).
template <class T>
CLI::Validator whole_number(T lo, T hi) {
  static_assert(std::is_integral_v<T>);
  const std::string expected = fmt::format("must be a whole number {}-{}", lo, hi);
  return CLI::Validator(
      [lo, hi, expected](std::string& text) {
        T v{};
        const char* last = text.data() + text.size();
        auto [end, ec] = std::from_chars(text.data(), last, v);
        const size_t digits = text.starts_with('-') ? 1 : 0;
        const bool leading_zero = text.size() > digits + 1 && text[digits] == '0';
        if (text.empty() || ec != std::errc() || end != last || leading_zero || v < lo || v > hi) {
          return fmt::format("{}, not '{}'", expected, text);
        }
        return std::string();
      },
      fmt::format("in [{} - {}]", lo, hi));
}

// A finite number in [lo, hi], or [lo, hi) with hi_excluded (not nan, not inf).
inline CLI::Validator number_in(double lo, double hi, bool hi_excluded = false) {
  const std::string expected =
      fmt::format("must be a number {}-{}{}", lo, hi, hi_excluded ? fmt::format(", {} excluded", hi) : "");
  return CLI::Validator(
      [lo, hi, hi_excluded, expected](std::string& text) {
        double v = 0;
        const char* last = text.data() + text.size();
        auto [end, ec] = std::from_chars(text.data(), last, v);
        if (text.empty() || ec != std::errc() || end != last || !std::isfinite(v) || v < lo ||
            (hi_excluded ? v >= hi : v > hi)) {
          return fmt::format("{}, not '{}'", expected, text);
        }
        return std::string();
      },
      fmt::format("in [{} - {}{}", lo, hi, hi_excluded ? ")" : "]"));
}

}  // namespace ttemu::launcher
