// src/view/include/vramscope/view/render.hpp -- draws one frame of `vramscope top` from the view model onto a canvas
//
// render() is a pure function of (model, canvas size, unicode): the same model always gives the
// same frame, which is what makes canvas goldens and `top --once` possible.
#pragma once

#include <cstdint>
#include <string>

#include "vramscope/view/canvas.hpp"
#include "vramscope/view/layout.hpp"
#include "vramscope/view/model.hpp"

namespace vramscope::view {

/// Clears `canvas` and draws the whole view of `model` on it.
void render(const ViewModel& model, Canvas& canvas);

/// The layout render() uses for `model` on a `width` x `height` terminal.
Layout layout_for(const ViewModel& model, int width, int height);

namespace detail {
/// Colours of the memory owners, shared by bars, legends and graphs.
inline constexpr Style allocated_style{Color::Green, Color::Default, AttrNone};
inline constexpr Style cached_style{Color::Yellow, Color::Default, AttrNone};
inline constexpr Style non_pytorch_style{Color::Magenta, Color::Default, AttrNone};
inline constexpr Style other_style{Color::Blue, Color::Default, AttrNone};
inline constexpr Style driver_style{Color::White, Color::Default, AttrDim};
inline constexpr Style free_style{Color::Default, Color::Default, AttrDim};
inline constexpr Style error_style{Color::Red, Color::Default, AttrBold};
inline constexpr Style title_style{Color::Cyan, Color::Default, AttrBold};

/// Draws GPU `gpu` into its panel (render_gpu.cpp).
void render_gpu(const GpuView& gpu, const GpuPanelLayout& panel, Canvas& canvas);
}  // namespace detail

}  // namespace vramscope::view
