#include "kernelbench/builtin.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>

#include "common/job.h"
#include "kernels/registry.h"

namespace ak::kernelbench {
namespace {

// ---- Reading a problem file: just enough Python to compare it with a template ----------------

// One logical line: its indentation and its text without comments, without docstrings (a
// triple-quoted string that starts a statement), and with whitespace dropped except one space
// between two identifier characters ("return torch.softmax(x,dim=1)").
struct Line {
  int indent = 0;
  std::string text;
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<Line> logical_lines(const std::string& code) {
  std::vector<Line> out;
  std::string cur;
  int cur_indent = 0, line_indent = 0, depth = 0;
  bool line_start = true, space = false, continued = false;
  const size_t n = code.size();
  auto put = [&](const std::string& s) {
    if (cur.empty()) cur_indent = line_indent;
    if (space && !cur.empty() && ident_char(cur.back()) && ident_char(s.front())) cur += ' ';
    space = false;
    cur += s;
  };
  for (size_t i = 0; i < n;) {
    const char c = code[i];
    if (line_start) {
      int w = 0;
      while (i < n && (code[i] == ' ' || code[i] == '\t')) w += code[i++] == '\t' ? 8 : 1;
      if (depth == 0 && !continued) line_indent = w;
      line_start = false;
      continued = false;
      continue;
    }
    if (c == '\n') {
      ++i;
      line_start = true;
      space = true;
      if (depth == 0 && !continued && !cur.empty()) {
        out.push_back({cur_indent, cur});
        cur.clear();
      }
      continue;
    }
    if (c == '#') {
      while (i < n && code[i] != '\n') ++i;
      continue;
    }
    if (c == '\\' && i + 1 < n && code[i + 1] == '\n') {
      continued = true;
      i += 2;
      line_start = true;
      space = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      space = true;
      ++i;
      continue;
    }
    if ((c == '"' || c == '\'') && code.compare(i, 3, std::string(3, c)) == 0) {
      const size_t end = code.find(std::string(3, c), i + 3);
      const size_t stop = end == std::string::npos ? n : end + 3;
      if (!cur.empty()) put("'<str>'");  // a value, not a docstring: keep a marker
      i = stop;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < n && code[j] != c && code[j] != '\n') j += code[j] == '\\' ? 2 : 1;
      put(code.substr(i, std::min(j + 1, n) - i));
      i = j + 1;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    put(std::string(1, c));
    ++i;
  }
  if (!cur.empty()) out.push_back({cur_indent, cur});
  return out;
}

// Splits at commas outside brackets; empty pieces (a trailing comma) dropped.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

struct Function {
  std::vector<std::string> params;  // names; annotations and defaults dropped
  std::vector<std::string> body;    // logical lines
};

struct Module {
  std::map<std::string, std::string> constants;  // module-level NAME = expr
  std::map<std::string, Function> functions;      // "get_inputs", "Model.forward", ...
  std::vector<std::string> class_statements;      // class-body lines outside methods, "Model: ..."
};

Module read_module(const std::string& code) {
  static const std::regex class_re(R"(^class ([A-Za-z_]\w*)(\(.*\))?:$)");
  static const std::regex def_re(R"(^def ([A-Za-z_]\w*)\((.*)\)(->.*)?:$)");
  static const std::regex assign_re(R"(^([A-Za-z_]\w*)=([^=].*)$)");
  Module m;
  std::string cls, fn;
  int cls_indent = -1, fn_indent = -1;
  for (const Line& l : logical_lines(code)) {
    if (!fn.empty() && l.indent > fn_indent) {
      m.functions[fn].body.push_back(l.text);
      continue;
    }
    fn.clear();
    if (!cls.empty() && l.indent <= cls_indent) cls.clear();
    std::smatch mt;
    if (std::regex_match(l.text, mt, def_re)) {
      fn = cls.empty() ? mt[1].str() : cls + "." + mt[1].str();
      fn_indent = l.indent;
      Function f;
      for (const std::string& p : split_top(mt[2].str())) {
        const size_t cut = p.find_first_of(":=");
        f.params.push_back(p.substr(0, cut));
      }
      m.functions[fn] = f;
    } else if (std::regex_match(l.text, mt, class_re) && l.indent == 0) {
      cls = mt[1].str();
      cls_indent = l.indent;
    } else if (!cls.empty()) {
      m.class_statements.push_back(cls + ": " + l.text);
    } else if (l.indent == 0 && std::regex_match(l.text, mt, assign_re)) {
      m.constants[mt[1].str()] = mt[2].str();
    }
  }
  return m;
}

// Integer arithmetic over literals and module constants: + - * // and brackets.
class IntEval {
 public:
  IntEval(const Module& m, std::string text, int depth) : m_(m), s_(std::move(text)), depth_(depth) {}
  std::optional<int64_t> run() {
    auto v = expr();
    if (!v || i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  std::optional<int64_t> expr() {
    auto v = term();
    while (v && i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) {
      const char op = s_[i_++];
      auto r = term();
      if (!r) return std::nullopt;
      int64_t out = 0;
      if (op == '+' ? __builtin_add_overflow(*v, *r, &out) : __builtin_sub_overflow(*v, *r, &out)) return std::nullopt;
      v = out;
    }
    return v;
  }
  std::optional<int64_t> term() {
    auto v = factor();
    while (v && i_ < s_.size() && (s_[i_] == '*' || s_.compare(i_, 2, "//") == 0)) {
      const bool div = s_[i_] == '/';
      if (!div && s_.compare(i_, 2, "**") == 0) return std::nullopt;
      i_ += div ? 2 : 1;
      auto r = factor();
      if (!r) return std::nullopt;
      if (div) {
        if (*r <= 0 || *v < 0) return std::nullopt;  // floor division of negatives: not needed
        v = *v / *r;
      } else {
        int64_t out = 0;
        if (__builtin_mul_overflow(*v, *r, &out)) return std::nullopt;
        v = out;
      }
    }
    return v;
  }
  std::optional<int64_t> factor() {
    if (i_ >= s_.size()) return std::nullopt;
    if (s_[i_] == '-') {
      ++i_;
      auto v = factor();
      if (!v) return std::nullopt;
      return -*v;
    }
    if (s_[i_] == '(') {
      ++i_;
      auto v = expr();
      if (!v || i_ >= s_.size() || s_[i_] != ')') return std::nullopt;
      ++i_;
      return v;
    }
    const size_t start = i_;
    while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
    const std::string tok = s_.substr(start, i_ - start);
    if (tok.empty()) return std::nullopt;
    if (std::isdigit(static_cast<unsigned char>(tok[0]))) {
      int64_t v = 0;
      for (char c : tok) {
        if (c == '_') continue;
        if (!std::isdigit(static_cast<unsigned char>(c)) || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, c - '0', &v))
          return std::nullopt;
      }
      return v;
    }
    auto it = m_.constants.find(tok);
    if (it == m_.constants.end() || depth_ > 16) return std::nullopt;
    return IntEval(m_, it->second, depth_ + 1).run();
  }

  const Module& m_;
  std::string s_;
  int depth_;
  size_t i_ = 0;
};

std::optional<int64_t> eval_int(const Module& m, const std::string& text) { return IntEval(m, text, 0).run(); }

// A tensor that get_inputs returns, as declared: its dims (expression texts) and, for
// torch.randint, its bounds.
struct InputDecl {
  bool integer = false;
  std::vector<std::string> dims;
  std::string low, high;  // randint only
};

std::string quote(const std::string& s) { return "`" + s + "`"; }

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// Dims of a size argument list; "*name" expands a module-level tuple constant.
std::optional<std::vector<std::string>> size_args(const Module& m, const std::vector<std::string>& args) {
  std::vector<std::string> dims;
  for (const std::string& a : args) {
    if (a.find('=') != std::string::npos) return std::nullopt;  // dtype=, device=, generator=
    if (a[0] == '*') {
      auto it = m.constants.find(a.substr(1));
      if (it == m.constants.end() || it->second.size() < 2 || it->second.front() != '(' || it->second.back() != ')')
        return std::nullopt;
      for (const std::string& d : split_top(it->second.substr(1, it->second.size() - 2))) dims.push_back(d);
    } else {
      dims.push_back(a);
    }
  }
  return dims;
}

std::optional<InputDecl> factory(const Module& m, const std::string& text) {
  static const std::regex rand_re(R"(^torch\.(rand|randn)\((.*)\)$)");
  static const std::regex randint_re(R"(^torch\.randint\((.*)\)$)");
  std::smatch mt;
  if (std::regex_match(text, mt, rand_re)) {
    auto dims = size_args(m, split_top(mt[2].str()));
    if (!dims) return std::nullopt;
    return InputDecl{false, *dims, "", ""};
  }
  if (std::regex_match(text, mt, randint_re)) {
    auto args = split_top(mt[1].str());
    if (args.size() == 2) args.insert(args.begin(), "0");
    if (args.size() != 3 || args[2].size() < 2 || args[2].front() != '(' || args[2].back() != ')') return std::nullopt;
    auto dims = size_args(m, split_top(args[2].substr(1, args[2].size() - 2)));
    if (!dims) return std::nullopt;
    return InputDecl{true, *dims, args[0], args[1]};
  }
  return std::nullopt;
}

// The tensors get_inputs returns. Lines it reads: `NAME = torch.rand|randn|randint(...)`,
// `NAME = (NAME + NAME.T) / 2` (a symmetric square matrix: same shape), and `return [...]`.
Result<std::vector<InputDecl>> declared_inputs(const Module& m) {
  auto it = m.functions.find("get_inputs");
  if (it == m.functions.end() || !it->second.params.empty())
    return Status::not_found("get_inputs() is not defined without parameters");
  static const std::regex assign_re(R"(^([A-Za-z_]\w*)=(.*)$)");
  static const std::regex sym_re(R"(^\(([A-Za-z_]\w*)\+([A-Za-z_]\w*)\.T\)/2$)");
  std::map<std::string, InputDecl> vars;
  std::optional<std::vector<InputDecl>> out;
  for (const std::string& line : it->second.body) {
    std::smatch mt;
    if (out) return Status::not_found("get_inputs has a line after its return: " + quote(line));
    if (line.rfind("return[", 0) == 0 && line.back() == ']') {
      out.emplace();
      for (const std::string& item : split_top(line.substr(7, line.size() - 8))) {
        if (auto v = vars.find(item); v != vars.end()) {
          out->push_back(v->second);
        } else if (auto f = factory(m, item)) {
          out->push_back(*f);
        } else {
          return Status::not_found("get_inputs returns " + quote(item) + ", which the templates do not read");
        }
      }
    } else if (std::regex_match(line, mt, assign_re)) {
      const std::string name = mt[1].str(), rhs = mt[2].str();
      std::smatch sm;
      if (auto f = factory(m, rhs)) {
        vars[name] = *f;
      } else if (std::regex_match(rhs, sm, sym_re) && sm[1].str() == name && sm[2].str() == name && vars.count(name) &&
                 vars[name].dims.size() == 2 && vars[name].dims[0] == vars[name].dims[1]) {
        // (A + A.T) / 2 of a square A: the same shape and dtype
      } else {
        return Status::not_found("get_inputs line " + quote(line) + " is not one the templates read");
      }
    } else {
      return Status::not_found("get_inputs line " + quote(line) + " is not one the templates read");
    }
  }
  if (!out) return Status::not_found("get_inputs has no `return [...]`");
  return *out;
}

// ---- Templates ------------------------------------------------------------------------------

// What a template found in a problem: the kernel type, its shape as declared (nullopt where a
// dim is not integer arithmetic over constants), ModelNew's parameters and its forward, the
// latter with {LAUNCH} where the kernel launch's keyword arguments go.
struct Plan {
  std::string kernel_type;
  std::vector<std::optional<int64_t>> shape;
  std::string shape_names;     // "[rows, cols]"
  std::string model;           // class ModelNew ...
  std::vector<std::string> notes;  // header lines about the mapping
};

Status mismatch(const std::string& what, const std::string& got, const std::string& want) {
  return Status::not_found(what + " is " + got + "; the template expects " + want);
}

std::string body_text(const Function& f) { return f.body.empty() ? "empty" : quote(join(f.body, "; ")); }

// Model's methods are exactly __init__ (a plain super().__init__() unless `init` says more) and
// forward; get_init_inputs returns `init_inputs` (not checked when empty).
Status check_model(const Module& m, const std::vector<std::string>& init_params,
                   const std::vector<std::string>& init_body, const std::string& init_inputs) {
  if (!m.class_statements.empty()) return Status::not_found("class body has " + quote(m.class_statements.front()));
  for (const auto& [name, f] : m.functions)
    if (name.rfind("Model.", 0) == 0 && name != "Model.__init__" && name != "Model.forward")
      return Status::not_found("Model has a method " + name.substr(6) + " besides __init__ and forward");
  auto init = m.functions.find("Model.__init__");
  auto fwd = m.functions.find("Model.forward");
  if (init == m.functions.end() || fwd == m.functions.end())
    return Status::not_found("Model does not define both __init__ and forward");
  if (init->second.params != init_params)
    return mismatch("Model.__init__'s parameter list", "(" + join(init->second.params, ", ") + ")",
                    "(" + join(init_params, ", ") + ")");
  const std::vector<std::string>& b = init->second.body;
  const bool super_ok = !b.empty() && (b[0] == "super(Model,self).__init__()" || b[0] == "super().__init__()");
  if (!super_ok || std::vector<std::string>(b.begin() + 1, b.end()) != init_body)
    return mismatch("Model.__init__'s body", body_text(init->second),
                    quote("super().__init__()" + (init_body.empty() ? "" : "; " + join(init_body, "; "))));
  if (init_inputs.empty()) return Status::ok_status();  // the template reads get_init_inputs itself
  auto gi = m.functions.find("get_init_inputs");
  if (gi == m.functions.end() || gi->second.body != std::vector<std::string>{"return" + init_inputs})
    return mismatch("get_init_inputs", gi == m.functions.end() ? "missing" : body_text(gi->second),
                    quote("return " + init_inputs));
  return Status::ok_status();
}

// forward(self, <n names>) whose body is one `return <expr>` matching one of `forms` after
// substituting the parameter names for $0, $1, ...
Status check_forward(const Module& m, size_t n_args, const std::vector<std::string>& forms) {
  const Function& f = m.functions.at("Model.forward");
  if (f.params.size() != n_args + 1 || f.params[0] != "self")
    return mismatch("Model.forward's parameter list", "(" + join(f.params, ", ") + ")",
                    "self and " + std::to_string(n_args) + " tensor(s)");
  std::vector<std::string> want;
  for (std::string form : forms) {
    for (size_t k = 0; k < n_args; ++k) {
      const std::string key = "$" + std::to_string(k);
      for (size_t p = form.find(key); p != std::string::npos; p = form.find(key)) form.replace(p, 2, f.params[k + 1]);
    }
    want.push_back("return " + form);
  }
  if (f.body.size() != 1 || std::find(want.begin(), want.end(), f.body[0]) == want.end())
    return mismatch("Model.forward's body", body_text(f), "one of " + quote(join(want, "`, `")));
  return Status::ok_status();
}

Result<std::vector<InputDecl>> check_inputs(const Module& m, const std::vector<std::pair<bool, size_t>>& want,
                                            const std::string& what) {
  auto in = declared_inputs(m);
  if (!in.ok()) return in.status();
  bool ok = in->size() == want.size();
  for (size_t k = 0; ok && k < want.size(); ++k)
    ok = (*in)[k].integer == want[k].first && (*in)[k].dims.size() == want[k].second;
  if (!ok) {
    std::vector<std::string> got;
    for (const InputDecl& d : *in)
      got.push_back(std::string(d.integer ? "int " : "float ") + std::to_string(d.dims.size()) + "-D");
    return Status::not_found("get_inputs returns [" + join(got, ", ") + "]; the template expects " + what);
  }
  return in;
}

std::optional<int64_t> product(const std::vector<std::optional<int64_t>>& v) {
  int64_t p = 1;
  for (const auto& x : v)
    if (!x || __builtin_mul_overflow(p, *x, &p)) return std::nullopt;
  return p;
}

std::vector<std::optional<int64_t>> eval_dims(const Module& m, const std::vector<std::string>& dims) {
  std::vector<std::optional<int64_t>> out;
  for (const std::string& d : dims) out.push_back(eval_int(m, d));
  return out;
}

const char* kRowKernelCall = "{ENTRY}[(rows,)]({ARGS}, {LAUNCH})";

Result<Plan> softmax_plan(const Module& m) {
  if (Status s = check_model(m, {"self"}, {}, "[]"); !s.ok()) return s;
  const std::vector<std::string> ops = {"torch.softmax", "torch.nn.functional.softmax", "F.softmax"};
  std::vector<std::string> forms;
  for (const std::string& op : ops)
    for (const char* dim : {"1", "-1"}) forms.push_back(op + "($0,dim=" + dim + ")");
  if (Status s = check_forward(m, 1, forms); !s.ok()) return s;
  auto in = check_inputs(m, {{false, 2}}, "one 2-D float tensor (softmax over dim 1 = the last dim)");
  if (!in.ok()) return in.status();
  Plan p;
  p.kernel_type = "softmax";
  p.shape = eval_dims(m, (*in)[0].dims);
  p.shape_names = "[rows, cols]";
  p.model = R"py(class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.dim() != 2:
            raise ValueError(f"built-in softmax: expected a 2-D input (softmax over dim 1), got shape {tuple(x.shape)}")
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        if y.numel() == 0:
            return y
        {CALL}
        return y
)py";
  const std::string call = std::string(kRowKernelCall);
  p.model.replace(p.model.find("{CALL}"), 6, call);
  p.model.replace(p.model.find("{ARGS}"), 6, "x, y, rows, cols");
  return p;
}

Result<Plan> layernorm_plan(const Module& m) {
  auto init = m.functions.find("Model.__init__");
  if (init == m.functions.end() || init->second.params.size() != 2)
    return Status::not_found("Model.__init__ does not take exactly one argument (the normalized shape)");
  const std::string ns = init->second.params[1];
  // nn.LayerNorm with its defaults: eps 1e-5 (the kernel's), elementwise_affine and bias true.
  static const std::regex ln_re(R"(^self\.([A-Za-z_]\w*)=(torch\.nn|nn)\.LayerNorm\((normalized_shape=)?([A-Za-z_]\w*)\)$)");
  const std::vector<std::string>& body = init->second.body;
  std::smatch mt;
  if (body.size() != 2 || !std::regex_match(body[1], mt, ln_re) || mt[4].str() != ns)
    return mismatch("Model.__init__'s body", body_text(init->second),
                    quote("super().__init__(); self.ln = nn.LayerNorm(normalized_shape=" + ns + ")"));
  const std::string attr = mt[1].str();
  if (Status s = check_model(m, {"self", ns}, {body[1]}, ""); !s.ok()) return s;
  if (Status s = check_forward(m, 1, {"self." + attr + "($0)"}); !s.ok()) return s;
  // get_init_inputs: [(d1, ..., dk)], [[d1, ...]] or [d]: the normalized shape.
  auto gi = m.functions.find("get_init_inputs");
  std::vector<std::string> norm;
  if (gi != m.functions.end() && gi->second.body.size() == 1) {
    const std::string& r = gi->second.body[0];
    if (r.rfind("return[", 0) == 0 && r.back() == ']') {
      const auto items = split_top(r.substr(7, r.size() - 8));
      if (items.size() == 1) {
        const std::string& a = items[0];
        if (a.size() >= 2 && (a.front() == '(' || a.front() == '['))
          norm = split_top(a.substr(1, a.size() - 2));
        else
          norm = {a};
      }
    }
  }
  if (norm.empty())
    return mismatch("get_init_inputs", gi == m.functions.end() ? "missing" : body_text(gi->second),
                    quote("return [(d1, ..., dk)]") + " (the normalized shape)");
  auto in = declared_inputs(m);
  if (!in.ok()) return in.status();
  if (in->size() != 1 || (*in)[0].integer || (*in)[0].dims.size() < norm.size())
    return Status::not_found("get_inputs does not return one float tensor of at least " + std::to_string(norm.size()) +
                             " dims (the normalized shape's)");
  const auto& dims = (*in)[0].dims;
  const size_t lead = dims.size() - norm.size();
  const auto x_dims = eval_dims(m, dims);
  const auto n_dims = eval_dims(m, norm);
  for (size_t k = 0; k < norm.size(); ++k) {
    const auto& a = x_dims[lead + k];
    const auto& b = n_dims[k];
    if (a && b ? *a != *b : dims[lead + k] != norm[k])
      return Status::not_found("the input's trailing dims (" +
                               join(std::vector<std::string>(dims.begin() + long(lead), dims.end()), ", ") +
                               ") are not the normalized shape (" + join(norm, ", ") + ")");
  }
  Plan p;
  p.kernel_type = "layernorm";
  p.shape = {product(std::vector<std::optional<int64_t>>(x_dims.begin(), x_dims.begin() + long(lead))), product(n_dims)};
  p.shape_names = "[rows, cols] (rows: the leading dims, cols: the normalized dims)";
  p.notes.push_back("nn.LayerNorm(" + ns + ") as in Model: weight (ones) and bias (zeros) over the normalized shape, eps 1e-5");
  p.model = R"py(class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        # nn.LayerNorm's parameters, created in its order: weight then bias
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))

    def forward(self, x):
        k = len(self.normalized_shape)
        if tuple(x.shape[x.dim() - k:]) != self.normalized_shape:
            raise ValueError(f"built-in layernorm: input shape {tuple(x.shape)} does not end in {self.normalized_shape}")
        x = x.contiguous()
        cols = self.weight.numel()
        rows = x.numel() // cols
        y = torch.empty_like(x)
        if y.numel() == 0:
            return y
        w = self.weight.contiguous()
        b = self.bias.contiguous()
        {CALL}
        return y
)py";
  p.model.replace(p.model.find("{CALL}"), 6, kRowKernelCall);
  p.model.replace(p.model.find("{ARGS}"), 6, "x, w, b, y, rows, cols");
  return p;
}

Result<Plan> matmul_plan(const Module& m) {
  if (Status s = check_model(m, {"self"}, {}, "[]"); !s.ok()) return s;
  if (Status s = check_forward(m, 2, {"torch.matmul($0,$1)", "torch.mm($0,$1)", "$0@$1"}); !s.ok()) return s;
  auto in = check_inputs(m, {{false, 2}, {false, 2}}, "two 2-D float tensors A [M, K], B [K, N]");
  if (!in.ok()) return in.status();
  const auto a = eval_dims(m, (*in)[0].dims), b = eval_dims(m, (*in)[1].dims);
  if (a[1] && b[0] ? *a[1] != *b[0] : (*in)[0].dims[1] != (*in)[1].dims[0])
    return Status::not_found("A's columns (" + (*in)[0].dims[1] + ") and B's rows (" + (*in)[1].dims[0] + ") differ");
  Plan p;
  p.kernel_type = "matmul";
  p.shape = {a[0], b[1], a[1]};
  p.shape_names = "[M, N, K]";
  p.model = R"py(class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
            raise ValueError(f"built-in matmul: expected A [M, K] and B [K, N], got {tuple(A.shape)} and {tuple(B.shape)}")
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        if C.numel() == 0:
            return C
        if K == 0:
            return C.zero_()
        grid = (triton.cdiv(M, {BM}) * triton.cdiv(N, {BN}),)
        {ENTRY}[grid](A, B, C, M, N, K, {LAUNCH})
        return C
)py";
  return p;
}

Result<Plan> cross_entropy_plan(const Module& m) {
  if (Status s = check_model(m, {"self"}, {}, "[]"); !s.ok()) return s;
  if (Status s = check_forward(m, 2, {"torch.nn.functional.cross_entropy($0,$1)", "F.cross_entropy($0,$1)"}); !s.ok())
    return s;
  auto in = check_inputs(m, {{false, 2}, {true, 1}}, "2-D float logits and 1-D integer targets");
  if (!in.ok()) return in.status();
  const InputDecl& logits = (*in)[0];
  const InputDecl& targets = (*in)[1];
  const auto x = eval_dims(m, logits.dims);
  const auto t = eval_dims(m, targets.dims);
  const auto low = eval_int(m, targets.low), high = eval_int(m, targets.high);
  // Targets in [0, cols): then no target is ignore_index (-100) and the mean over rows is
  // F.cross_entropy's mean reduction.
  if (!low || *low != 0 || !high || !x[1] || *high > *x[1] || *high < 1)
    return Status::not_found("targets are torch.randint(" + targets.low + ", " + targets.high +
                             ", ...); the template needs them in [0, classes) with classes = " + logits.dims[1] +
                             " (no ignore_index -100)");
  if (x[0] && t[0] ? *x[0] != *t[0] : logits.dims[0] != targets.dims[0])
    return Status::not_found("logits and targets have different numbers of rows");
  Plan p;
  p.kernel_type = "cross_entropy";
  p.shape = {x[0], x[1]};
  p.shape_names = "[rows, vocab]";
  p.notes.push_back("the library's per-row loss, then .mean() in torch: F.cross_entropy's mean reduction for targets in "
                    "[0, classes) (get_inputs draws them with torch.randint(" + targets.low + ", " + targets.high + ", ...))");
  p.model = R"py(class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        if predictions.dim() != 2 or targets.dim() != 1 or targets.shape[0] != predictions.shape[0]:
            raise ValueError(f"built-in cross_entropy: expected logits [rows, classes] and targets [rows], got {tuple(predictions.shape)} and {tuple(targets.shape)}")
        if targets.is_floating_point():
            raise TypeError("built-in cross_entropy: targets must be class indices (an integer tensor)")
        x = predictions.contiguous()
        t = targets.to(torch.int64).contiguous()
        rows, cols = x.shape
        loss = torch.empty((rows,), device=x.device, dtype=x.dtype)
        {CALL}
        return loss.mean()
)py";
  p.model.replace(p.model.find("{CALL}"), 6, kRowKernelCall);
  p.model.replace(p.model.find("{ARGS}"), 6, "x, t, loss, rows, cols");
  return p;
}

struct Covered {
  const char* name;
  Result<Plan> (*plan)(const Module&);
  const char* kernel_type;
};

const std::vector<Covered>& covered() {
  static const std::vector<Covered> list = {
      {"1_Square_matrix_multiplication_", matmul_plan, "matmul"},
      {"2_Standard_matrix_multiplication_", matmul_plan, "matmul"},
      {"4_Matrix_vector_multiplication_", matmul_plan, "matmul"},
      {"6_Matmul_with_large_K_dimension_", matmul_plan, "matmul"},
      {"7_Matmul_with_small_K_dimension_", matmul_plan, "matmul"},
      {"8_Matmul_with_irregular_shapes_", matmul_plan, "matmul"},
      {"9_Tall_skinny_matrix_multiplication_", matmul_plan, "matmul"},
      {"13_Matmul_for_symmetric_matrices", matmul_plan, "matmul"},
      {"23_Softmax", softmax_plan, "softmax"},
      {"40_LayerNorm", layernorm_plan, "layernorm"},
      {"95_CrossEntropyLoss", cross_entropy_plan, "cross_entropy"},
  };
  return list;
}

// Level-1 problems near the library's types that it cannot run exactly.
const std::map<std::string, std::string>& known_gaps() {
  static const std::map<std::string, std::string> gaps = {
      {"3_Batched_matrix_multiplication", "a batched product (torch.bmm of 3-D tensors); the library's matmul is one 2-D product"},
      {"10_3D_tensor_matrix_multiplication", "A is 3-D; the library's matmul takes 2-D A and B"},
      {"11_4D_tensor_matrix_multiplication", "an einsum over a 4-D tensor; the library's matmul takes 2-D A and B"},
      {"12_Matmul_with_diagonal_matrices_", "diag(A) @ B is a broadcast product, not a GEMM"},
      {"14_Matmul_for_upper_triangular_matrices", "triu(A @ B): two ops"},
      {"15_Matmul_for_lower_triangular_matrices", "tril(A @ B): two ops"},
      {"16_Matmul_with_transposed_A", "A.T @ B: the library's matmul reads row-major A [M, K]; a transposing copy would be a second op"},
      {"17_Matmul_with_transposed_B", "A @ B.T: the library's matmul reads row-major B [K, N]; a transposing copy would be a second op"},
      {"18_Matmul_with_transposed_both", "A.T @ B.T: the library's matmul reads row-major operands"},
      {"24_LogSoftmax", "log-softmax: the library has softmax only"},
      {"36_RMSNorm_", "normalizes over dim 1 of a 4-D input with eps 1e-5 and no weight; the library's rmsnorm normalizes the "
                      "last dim with eps 1e-6 and a weight"},
      {"47_Sum_reduction_over_a_dimension", "sums over dim 1 of a 3-D input; the library's reduce sums the last dim"},
      {"48_Mean_reduction_over_a_dimension", "a mean over dim 1 of a 3-D input; the library's reduce sums the last dim"},
      {"49_Max_reduction_over_a_dimension", "a max over dim 1 of a 3-D input; the library's reduce_max reduces the last dim"},
      {"53_Min_reduction_over_a_dimension", "a min; the library has sum and max reductions"},
      {"97_ScaledDotProductAttention", "the library has no Triton attention source (flash_attention is CUDA only)"},
  };
  return gaps;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

std::string config_text(const std::map<std::string, int64_t>& c) {
  std::string out;
  for (const auto& [k, v] : c) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> builtin_problems() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Covered& c : covered()) out.emplace_back(c.name, c.kernel_type);
  return out;
}

std::string generation_file_name(int level, int problem_id, int sample_id) {
  return "level_" + std::to_string(level) + "_problem_" + std::to_string(problem_id) + "_sample_" +
         std::to_string(sample_id) + "_kernel.py";
}

Result<BuiltinCandidate> builtin_candidate(const Problem& p, const BuiltinOptions& o) {
  const auto dtype = parse_dtype(o.precision);
  if (!dtype) return Status::invalid("precision " + o.precision + ": expected fp32, fp16 or bf16");
  if (o.tuned && o.gpu_model.empty())
    return Status::invalid("a tuning database needs the GPU model whose entries to use (tuned configurations are per GPU model)");
  std::string stem = p.name;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".py") == 0) stem.resize(stem.size() - 3);
  if (p.level != 1) return Status::not_found("built-in candidates cover level 1 only");
  const Covered* entry = nullptr;
  for (const Covered& c : covered())
    if (stem == c.name) entry = &c;
  if (!entry) {
    auto gap = known_gaps().find(stem);
    return Status::not_found(gap != known_gaps().end() ? gap->second : "no built-in template for this problem");
  }
  const Module m = read_module(p.code);
  auto plan = entry->plan(m);
  if (!plan.ok())
    return Status::not_found("not the single " + std::string(entry->kernel_type) + " op the template assumes: " +
                             plan.status().message());

  const kernels::KernelSpec* spec = kernels::find(plan->kernel_type);
  if (!spec || !spec->backends.count(Backend::kTriton))
    return Status::internal("kernel type " + plan->kernel_type + " has no Triton source in this build");
  const kernels::BackendSource& src = spec->backends.at(Backend::kTriton);

  BuiltinCandidate c;
  c.kernel_type = plan->kernel_type;
  bool shape_known = !plan->shape.empty();
  for (const auto& d : plan->shape) shape_known = shape_known && d && *d >= 1;
  if (shape_known)
    for (const auto& d : plan->shape) c.declared_shape.push_back(*d);

  // Configuration: the spec's default, with a tuned entry on top when one matches.
  c.config = kernels::default_config(src, *dtype);
  c.config_origin = "default: the Triton default configuration of kernels/" + c.kernel_type + "/spec.cc for " + o.precision;
  if (o.tuned) {
    const std::string where = "tuning database " + o.tuning_path + " (" + o.gpu_model + ", triton, " + o.precision + ")";
    if (!shape_known) {
      c.config_origin += "; " + where + " not consulted: the declared shape is not integer arithmetic over constants";
    } else if (auto match = o.tuned->find(c.kernel_type, o.gpu_model, o.precision, c.declared_shape, "triton")) {
      std::string bad;
      for (const auto& [k, v] : match->config) {
        const bool known = std::any_of(src.space.begin(), src.space.end(), [&](const kernels::Tunable& t) { return t.name == k; });
        if (!known || v < 1) bad = k;
      }
      if (!bad.empty()) {
        c.config_origin += "; the entry of " + where + " at " + shape_text(match->shape) + " has " + bad +
                           ", not a Triton tunable of " + c.kernel_type + ", so it was not used";
      } else {
        for (const auto& [k, v] : match->config) c.config[k] = v;
        c.tuned = true;
        c.config_origin = "tuned: " + where + ", " +
                          (match->exact ? "entry at the declared shape " : "nearest tuned shape ") + shape_text(match->shape);
      }
    } else {
      c.config_origin += "; " + where + " has no " + c.kernel_type + " entry";
    }
  }

  // The launch: constexpr tunables by name, then num_warps and num_stages.
  std::string launch;
  for (const auto& [k, v] : c.config)
    if (k != "AK_NUM_WARPS" && k != "AK_NUM_STAGES") launch += k + "=" + std::to_string(v) + ", ";
  launch += "num_warps=" + std::to_string(kernels::config_value(c.config, src.space, "AK_NUM_WARPS", 4)) +
            ", num_stages=" + std::to_string(kernels::config_value(c.config, src.space, "AK_NUM_STAGES", 1));
  std::string model = plan->model;
  replace_all(model, "{ENTRY}", src.entry);
  replace_all(model, "{LAUNCH}", launch);
  for (const auto& [k, v] : c.config) replace_all(model, "{" + k + "}", std::to_string(v));

  std::ostringstream shape_line;
  shape_line << "# Declared shape " << plan->shape_names << ": ";
  if (shape_known) {
    shape_line << shape_text(c.declared_shape);
  } else {
    shape_line << "not evaluated (";
    for (size_t k = 0; k < plan->shape.size(); ++k)
      shape_line << (k ? ", " : "") << (plan->shape[k] ? std::to_string(*plan->shape[k]) : "?");
    shape_line << ")";
  }
  shape_line << "; the launch is computed from the runtime shapes.";

  std::ostringstream out;
  const std::string lib = "kernels/" + c.kernel_type + "/" + c.kernel_type + ".py";
  out << "# Built-in candidate of the AutoKernel kernel library for KernelBench level " << p.level << " problem "
      << p.problem_id << " (" << p.name << ", code " << p.code_hash << ").\n"
      << "# Kernel type: " << c.kernel_type << ", Triton source " << lib << " (entry " << src.entry
      << "), embedded verbatim below.\n"
      << "# Precision: " << o.precision << " (the kernel takes its dtype from the tensors).\n"
      << shape_line.str() << "\n"
      << "# Configuration: " << config_text(c.config) << "\n"
      << "# Configuration from " << c.config_origin << ".\n";
  for (const std::string& n : plan->notes) out << "# " << n << ".\n";
  out << "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"
      << "# ---- " << lib << " ----\n"
      << src.source << (src.source.empty() || src.source.back() == '\n' ? "" : "\n") << "# ---- end of " << lib
      << " ----\n\n\n"
      << model;
  c.source = out.str();
  return c;
}

}  // namespace ak::kernelbench
