// The one place ttemu includes Boost.Asio. Boost 1.74's Asio uses std::exchange without
// including <utility>, which gcc 12 in C++20 mode no longer pulls in transitively.
#pragma once

#include <utility>  // must precede Asio (see above)

#include <boost/asio.hpp>
