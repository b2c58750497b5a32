// Plain data out of a pickle (pickle_data.h): a stack machine over the opcodes of plain values.
// Nodes live in one arena while they are built, and containers point at them, so that a memo
// reference (GET) sees a dict or list as it is when used, not as it was when memoized, and a
// structure that contains itself (a pickle may say so) frees with the rest. The finished tree is
// copied out: a node met again on its own path is refused, and so is a copy past kMaxValues (a million)
// values (shared references nested in turn double it at each level).
#include "trace/read/pickle_data.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "base/error.h"
#include "trace/format/codec.h"

namespace ringx::trace {
namespace {

struct Node;
using NodePtr = Node*;  // owned by the Unpickler's arena
constexpr uint64_t kMaxValues = 1'000'000;
struct Node {
  enum Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kSet, kMark } kind = kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<NodePtr> items;                      // list, tuple, set
  std::vector<std::pair<NodePtr, NodePtr>> pairs;  // dict
  bool onPath = false;                             // being copied out (a cycle: met again)
};

std::string pickleKeyText(const Node& n) {
  switch (n.kind) {
    case Node::kString:
      return n.s;
    case Node::kInt:
      return std::to_string(n.i);
    case Node::kBool:
      return n.b ? "True" : "False";
    case Node::kNone:
      return "None";
    default:
      return nlohmann::json(n.f).dump();
  }
}

nlohmann::json toJson(Node& n, int depth, uint64_t& values) {
  if (depth > 1000) throw std::runtime_error("nested more than 1000 deep");
  if (++values > kMaxValues) {
    throw std::runtime_error("more than 1,000,000 values (shared references nested in turn)");
  }
  if (n.onPath) throw std::runtime_error("a structure that contains itself");
  struct OnPath {
    Node& n;
    explicit OnPath(Node& node) : n(node) { n.onPath = true; }
    ~OnPath() { n.onPath = false; }
  } onPath(n);
  switch (n.kind) {
    case Node::kNone:
    case Node::kMark:
      return nullptr;
    case Node::kBool:
      return n.b;
    case Node::kInt:
      return n.i;
    case Node::kFloat:
      return n.f;
    case Node::kString:
      return n.s;
    case Node::kList:
    case Node::kTuple:
    case Node::kSet: {
      nlohmann::json out = nlohmann::json::array();
      for (const NodePtr& item : n.items) out.push_back(toJson(*item, depth + 1, values));
      return out;
    }
    case Node::kDict: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [k, v] : n.pairs) out[pickleKeyText(*k)] = toJson(*v, depth + 1, values);
      return out;
    }
  }
  return nullptr;
}

class Unpickler {
 public:
  Unpickler(std::string_view bytes, const std::string& source) : in_(bytes), source_(source) {}

  nlohmann::json run() {
    for (;;) {
      const size_t at = pos_;
      const uint8_t op = u8();
      switch (op) {
        case 0x80:  // PROTO
          u8();
          break;
        case 0x95:  // FRAME: an 8-byte length, then the frame's opcodes
          take(8);
          break;
        case '.': {  // STOP
          if (stack_.size() != 1) fail(at, "STOP with a stack of " + std::to_string(stack_.size()));
          try {
            uint64_t values = 0;
            return toJson(*stack_.back(), 0, values);
          } catch (const std::exception& e) {
            fail(at, e.what());
          }
        }
        case '(':  // MARK
          marks_.push_back(stack_.size());
          break;
        case 'N':
          push(makeNode(Node::kNone));
          break;
        case 0x88:  // NEWTRUE
        case 0x89:  // NEWFALSE
          pushBool(op == 0x88);
          break;
        case 'J':
          pushInt(static_cast<int32_t>(le(4)));
          break;
        case 'K':
          pushInt(static_cast<int64_t>(le(1)));
          break;
        case 'M':
          pushInt(static_cast<int64_t>(le(2)));
          break;
        case 0x8a:    // LONG1
        case 0x8b: {  // LONG4
          const uint64_t n = op == 0x8a ? le(1) : le(4);
          if (n > 8) fail(at, "an integer of " + std::to_string(n) + " bytes (more than 64 bits)");
          const std::string_view b = take(n);
          uint64_t v = 0;
          for (size_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(b[k])} << (8 * k);
          if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80))
            v |= ~uint64_t{0} << (8 * n);
          pushInt(static_cast<int64_t>(v));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian double
          const std::string_view b = take(8);
          uint64_t bits = 0;
          for (char c : b) bits = bits << 8 | static_cast<uint8_t>(c);
          double d;
          std::memcpy(&d, &bits, sizeof d);
          auto n = makeNode(Node::kFloat);
          n->f = d;
          push(n);
          break;
        }
        case 'I':    // INT, text ("01" and "00" are True and False)
        case 'L': {  // LONG, text with a trailing L
          std::string text(line());
          if (op == 'L' && !text.empty() && text.back() == 'L') text.pop_back();
          if (op == 'I' && (text == "01" || text == "00")) {
            pushBool(text == "01");
            break;
          }
          try {
            pushInt(std::stoll(text));
          } catch (const std::exception&) {
            fail(at, "an integer that is not one: " + text);
          }
          break;
        }
        case 'F': {
          const std::string text(line());
          auto n = makeNode(Node::kFloat);
          try {
            n->f = std::stod(text);
          } catch (const std::exception&) {
            fail(at, "a float that is not one: " + text);
          }
          push(n);
          break;
        }
        case 0x8c:  // SHORT_BINUNICODE
        case 'C':   // SHORT_BINBYTES
        case 'U':   // SHORT_BINSTRING
          pushString(take(le(1)));
          break;
        case 'X':  // BINUNICODE
        case 'B':  // BINBYTES
        case 'T':  // BINSTRING
          pushString(take(le(4)));
          break;
        case 0x8d:  // BINUNICODE8
        case 0x8e:  // BINBYTES8
          pushString(take(le(8)));
          break;
        case 'V':  // UNICODE, raw-unicode-escaped text
          pushString(line());
          break;
        case 'S': {  // STRING, a quoted repr
          std::string_view text = line();
          if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"')) {
            text = text.substr(1, text.size() - 2);
          }
          pushString(text);
          break;
        }
        case ']':
          push(makeNode(Node::kList));
          break;
        case ')':
          push(makeNode(Node::kTuple));
          break;
        case '}':
          push(makeNode(Node::kDict));
          break;
        case 0x8f:  // EMPTY_SET
          push(makeNode(Node::kSet));
          break;
        case 0x85:  // TUPLE1..3
        case 0x86:
        case 0x87: {
          const size_t n = static_cast<size_t>(op - 0x84);
          need(at, n);
          auto t = makeNode(Node::kTuple);
          t->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(t);
          break;
        }
        case 't':     // TUPLE
        case 'l':     // LIST
        case 0x91: {  // FROZENSET
          auto c = makeNode(op == 'l' ? Node::kList : op == 't' ? Node::kTuple : Node::kSet);
          c->items = popToMark(at);
          push(c);
          break;
        }
        case 'd': {  // DICT
          auto d = makeNode(Node::kDict);
          addPairs(at, *d, popToMark(at));
          push(d);
          break;
        }
        case 'a': {  // APPEND
          need(at, 2);
          NodePtr item = pop();
          container(at, Node::kList).items.push_back(std::move(item));
          break;
        }
        case 'e': {  // APPENDS
          std::vector<NodePtr> items = popToMark(at);
          Node& list = container(at, Node::kList);
          list.items.insert(list.items.end(), items.begin(), items.end());
          break;
        }
        case 0x90: {  // ADDITEMS
          std::vector<NodePtr> items = popToMark(at);
          Node& set = container(at, Node::kSet);
          set.items.insert(set.items.end(), items.begin(), items.end());
          break;
        }
        case 's': {  // SETITEM
          need(at, 3);
          NodePtr value = pop(), key = pop();
          container(at, Node::kDict).pairs.emplace_back(std::move(key), std::move(value));
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<NodePtr> items = popToMark(at);
          addPairs(at, container(at, Node::kDict), items);
          break;
        }
        case 0x94:  // MEMOIZE
          need(at, 1);
          memo_.push_back(stack_.back());
          break;
        case 'q':  // BINPUT
        case 'r':  // LONG_BINPUT
        case 'p':  // PUT
          memoAt(at, op == 'q' ? le(1) : op == 'r' ? le(4) : number(at, line())) = top(at);
          break;
        case 'h':    // BINGET
        case 'j':    // LONG_BINGET
        case 'g': {  // GET
          const uint64_t k = op == 'h' ? le(1) : op == 'j' ? le(4) : number(at, line());
          if (k >= memo_.size() || !memo_[k]) fail(at, "a memo reference to nothing");
          push(memo_[k]);
          break;
        }
        case '0':  // POP
          need(at, 1);
          stack_.pop_back();
          break;
        case '1':  // POP_MARK
          popToMark(at);
          break;
        case '2':  // DUP
          push(top(at));
          break;
        case 'c':
        case 'i': {  // GLOBAL, INST: "module\nname\n"
          const std::string module(line()), name(line());
          refuse(at, module + "." + name);
        }
        case 0x93:  // STACK_GLOBAL
          refuse(at, stack_.size() >= 2 && stack_[stack_.size() - 2]->kind == Node::kString &&
                             stack_.back()->kind == Node::kString
                         ? stack_[stack_.size() - 2]->s + "." + stack_.back()->s
                         : std::string("a class"));
        case 'R':
        case 'b':
        case 'o':
        case 0x81:
        case 0x92:
        case 0x82:
        case 0x83:
        case 0x84:
        case 'P':
        case 'Q':
        case 0x96:
        case 0x97:
        case 0x98:
          refuse(at, std::string("an object (opcode 0x") + hex(op) + ")");
        default:
          fail(at, std::string("opcode 0x") + hex(op) + ", which is not a pickle's");
      }
    }
  }

 private:
  static std::string hex(uint8_t op) {
    const char* digits = "0123456789abcdef";
    return {digits[op >> 4], digits[op & 15]};
  }
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw FormatError(strCat(source_, ": not a readable pickle at byte ", at, ": ", what));
  }
  [[noreturn]] void refuse(size_t at, const std::string& what) const {
    throw FormatError(strCat(source_, ": the pickle asks for ", what, " at byte ", at,
                             "; refused: only plain data (dicts, lists, strings, numbers) is "
                             "read, as loading a class could run code"));
  }
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  std::string_view take(uint64_t n) {
    if (n > in_.size() - pos_) fail(pos_, "it ends early (cut off?)");
    const std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t le(size_t n) {
    const std::string_view b = take(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(b[k])} << (8 * k);
    return v;
  }
  std::string_view line() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) fail(pos_, "it ends early (cut off?)");
    const std::string_view out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  uint64_t number(size_t at, std::string_view text) {
    try {
      return std::stoull(std::string(text));
    } catch (const std::exception&) {
      fail(at, "a memo index that is not a number");
    }
  }
  NodePtr& memoAt(size_t at, uint64_t k) {
    if (k > 100'000'000) fail(at, "a memo index of " + std::to_string(k));
    if (k >= memo_.size()) memo_.resize(k + 1);
    return memo_[k];
  }
  void push(NodePtr n) { stack_.push_back(std::move(n)); }
  void pushInt(int64_t v) {
    auto n = makeNode(Node::kInt);
    n->i = v;
    push(n);
  }
  void pushBool(bool v) {
    auto n = makeNode(Node::kBool);
    n->b = v;
    push(n);
  }
  void pushString(std::string_view s) {
    auto n = makeNode(Node::kString);
    n->s = std::string(s);
    push(n);
  }
  void need(size_t at, size_t n) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail(at, "an opcode with too little on the stack");
  }
  NodePtr pop() {
    NodePtr n = std::move(stack_.back());
    stack_.pop_back();
    return n;
  }
  NodePtr top(size_t at) {
    need(at, 1);
    return stack_.back();
  }
  std::vector<NodePtr> popToMark(size_t at) {
    if (marks_.empty()) fail(at, "no MARK to go back to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<NodePtr> out(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return out;
  }
  Node& container(size_t at, Node::Kind kind) {
    need(at, 1);
    Node& n = *stack_.back();
    if (n.kind != kind) fail(at, "items added to something of another kind");
    return n;
  }
  void addPairs(size_t at, Node& dict, const std::vector<NodePtr>& items) {
    if (items.size() % 2 != 0) fail(at, "a dict with a key and no value");
    for (size_t k = 0; k < items.size(); k += 2) dict.pairs.emplace_back(items[k], items[k + 1]);
  }

  NodePtr makeNode(Node::Kind kind) {
    arena_.push_back(std::make_unique<Node>());
    arena_.back()->kind = kind;
    return arena_.back().get();
  }

  std::vector<std::unique_ptr<Node>> arena_;
  std::string_view in_;
  const std::string& source_;
  size_t pos_ = 0;
  std::vector<NodePtr> stack_;
  std::vector<size_t> marks_;
  std::vector<NodePtr> memo_;
};

}  // namespace

nlohmann::json readPickleData(std::string_view bytes, const std::string& source) {
  return Unpickler(bytes, source).run();
}

bool looksLikePickle(std::string_view head) {
  return head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x80 &&
         static_cast<uint8_t>(head[1]) >= 2 && static_cast<uint8_t>(head[1]) <= 5;
}

}  // namespace ringx::trace
