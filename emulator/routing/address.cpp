#include "emulator/routing/address.hpp"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

namespace ttemu::routing {

std::string to_string(ChipId chip) { return fmt::format("M{}D{}", chip.mesh, chip.device); }

std::string to_string(PortId port) {
  return fmt::format("M{}D{}P{}", port.chip.mesh, port.chip.device, port.port);
}

namespace {

// Reads "<letter><number>" at the front of text; advances text past it.
std::optional<unsigned> take_field(std::string_view& text, char letter, unsigned limit) {
  if (text.empty() || std::toupper(static_cast<unsigned char>(text.front())) != letter) {
    return std::nullopt;
  }
  text.remove_prefix(1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end == text.data() || value >= limit) return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

std::optional<ChipId> take_chip(std::string_view& text) {
  auto mesh = take_field(text, 'M', kMaxMeshes);
  if (!mesh) return std::nullopt;
  auto device = take_field(text, 'D', kMaxDevicesPerMesh);
  if (!device) return std::nullopt;
  return ChipId{static_cast<uint16_t>(*mesh), static_cast<uint16_t>(*device)};
}

}  // namespace

std::optional<ChipId> parse_chip(std::string_view text) {
  auto chip = take_chip(text);
  if (!chip || !text.empty()) return std::nullopt;
  return chip;
}

std::optional<PortId> parse_port(std::string_view text) {
  auto chip = take_chip(text);
  if (!chip) return std::nullopt;
  auto port = take_field(text, 'P', kMaxPorts);
  if (!port || !text.empty()) return std::nullopt;
  return PortId{*chip, static_cast<uint8_t>(*port)};
}

}  // namespace ttemu::routing
