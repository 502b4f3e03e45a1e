// The two themes (data-theme on <html>, CSS variables in style.css): the one picked with the
// toggle (kept in localStorage), else the system's preference.
import { createContext, useContext } from "react";

export type Theme = "light" | "dark";

const KEY = "stalwart.theme";

export function initialTheme(): Theme {
  const saved = localStorage.getItem(KEY);
  if (saved === "light" || saved === "dark") return saved;
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export const savedTheme = (): boolean => localStorage.getItem(KEY) !== null;
export const saveTheme = (theme: Theme): void => localStorage.setItem(KEY, theme);

export const ThemeContext = createContext<Theme>("light");

/** The theme shown now (charts redraw with its colours when it changes). */
export const useTheme = (): Theme => useContext(ThemeContext);
