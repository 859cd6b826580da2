#pragma once
// Overloaded{lambdas...}: one callable from several lambdas, for std::visit over a variant.

namespace stretch {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace stretch
