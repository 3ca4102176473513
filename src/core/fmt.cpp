// fmt's implementation, compiled once for every mhc library and program: the other sources
// include fmt's declarations alone (cmake/Dependencies.cmake says why, and why in an inline
// namespace of mhc's own).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
// The templates that fmt's headers declare but define only in header-only mode: the locale
// queries for the one character type mhc formats, and the locale itself (fmt/chrono.h's
// formatters ask for it).
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref) -> char;
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
}  // namespace detail
FMT_END_NAMESPACE
