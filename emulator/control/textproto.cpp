#include "emulator/control/textproto.hpp"

#include <cctype>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::control {

namespace {

// Nested messages deeper than this are refused before the recursion could exhaust the stack.
constexpr int kMaxDepth = 64;

struct Token {
  enum class Kind { End, Word, String, Punct };
  Kind kind = Kind::End;
  std::string text;
  int line = 1;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source) { next(); }

  TextField parse() {
    TextField root;
    root.kind = TextField::Kind::Message;
    root.line = 1;
    body(root, "", 0);
    return root;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(fmt::format("{}:{}: {}", source_, line, what));
  }

  std::string shown(const Token& t) const {
    if (t.kind == Token::Kind::End) return "the end of the file";
    if (t.kind == Token::Kind::String) return fmt::format("the string \"{}\"", t.text);
    return fmt::format("'{}'", t.text);
  }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  void next() {
    skip_space_and_comments();
    tok_ = Token{Token::Kind::End, "", line_};
    if (pos_ >= text_.size()) return;
    char c = text_[pos_];
    auto word_char = [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-' || ch == '+';
    };
    if (c == '"' || c == '\'') {
      tok_.kind = Token::Kind::String;
      ++pos_;
      while (true) {
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail(tok_.line, "a string is not closed on its line");
        char ch = text_[pos_++];
        if (ch == c) break;
        if (ch == '\\' && pos_ < text_.size()) {
          char e = text_[pos_++];
          tok_.text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          tok_.text += ch;
        }
      }
    } else if (word_char(c)) {
      tok_.kind = Token::Kind::Word;
      while (pos_ < text_.size() && word_char(text_[pos_])) tok_.text += text_[pos_++];
    } else if (std::string_view("{}[]<>:,;").find(c) != std::string_view::npos) {
      tok_.kind = Token::Kind::Punct;
      tok_.text = std::string(1, c);
      ++pos_;
    } else {
      fail(line_, fmt::format("unexpected character '{}'", std::string(1, c)));
    }
  }

  bool at(const char* punct) const { return tok_.kind == Token::Kind::Punct && tok_.text == punct; }

  // Fields until `close` ("" for the end of the file).
  void body(TextField& msg, const std::string& close, int depth) {
    if (depth > kMaxDepth) fail(tok_.line, "messages are nested too deep");
    while (true) {
      if (close.empty() ? tok_.kind == Token::Kind::End : at(close.c_str())) break;
      if (tok_.kind == Token::Kind::End) fail(tok_.line, fmt::format("'{}' of the message opened on line {} is missing", close, msg.line));
      field(msg, depth);
      if (at(",") || at(";")) next();
    }
    if (!close.empty()) next();
  }

  void field(TextField& msg, int depth) {
    if (tok_.kind != Token::Kind::Word || std::isdigit(static_cast<unsigned char>(tok_.text[0]))) {
      fail(tok_.line, fmt::format("expected a field name, found {}", shown(tok_)));
    }
    TextField f;
    f.name = tok_.text;
    f.line = tok_.line;
    next();
    bool colon = at(":");
    if (colon) next();
    if (at("[")) {
      if (!colon) fail(tok_.line, fmt::format("expected ':' before the list of '{}'", f.name));
      next();
      while (!at("]")) {
        msg.fields.push_back(value(f, depth));
        if (at(",")) {
          next();
        } else if (!at("]")) {
          fail(tok_.line, fmt::format("expected ',' or ']' in the list of '{}', found {}", f.name, shown(tok_)));
        }
      }
      next();
      return;
    }
    if (!colon && !at("{") && !at("<")) fail(tok_.line, fmt::format("expected ':' or '{{' after '{}', found {}", f.name, shown(tok_)));
    msg.fields.push_back(value(f, depth));
  }

  TextField value(TextField f, int depth) {
    f.line = tok_.line;
    if (at("{") || at("<")) {
      std::string close = at("{") ? "}" : ">";
      f.kind = TextField::Kind::Message;
      next();
      body(f, close, depth + 1);
    } else if (tok_.kind == Token::Kind::String || tok_.kind == Token::Kind::Word) {
      f.kind = tok_.kind == Token::Kind::String ? TextField::Kind::String : TextField::Kind::Word;
      f.value = tok_.text;
      next();
      // Adjacent strings concatenate, as in protobuf.
      while (f.kind == TextField::Kind::String && tok_.kind == Token::Kind::String) {
        f.value += tok_.text;
        next();
      }
    } else {
      fail(tok_.line, fmt::format("expected a value for '{}', found {}", f.name, shown(tok_)));
    }
    return f;
  }

  std::string_view text_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  Token tok_;
};

}  // namespace

TextField parse_textproto(std::string_view text, const std::string& source) {
  return Parser(text, source).parse();
}

}  // namespace ttemu::control
