import { useLayoutEffect, useMemo, useState } from "react";

/** A ref for an element and its content width in CSS pixels, kept current by a
 * ResizeObserver (0 until measured). Charts size their canvas from it: they never stretch.
 * The element may mount after the component does (a chart that first shows "no data yet"):
 * React's writes to the ref's `current` are seen, and the observer follows the element. */
export function useWidth<T extends HTMLElement>(): [React.RefObject<T>, number] {
  const [node, setNode] = useState<T | null>(null);
  const [width, setWidth] = useState(0);
  const ref = useMemo(() => {
    let element: T | null = null;
    return {
      get current(): T | null { return element; },
      set current(value: T | null) { element = value; setNode(value); },
    };
  }, []);
  useLayoutEffect(() => {
    if (!node) return undefined;
    const measure = (): void => setWidth(Math.floor(node.clientWidth));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(node);
    return () => observer.disconnect();
  }, [node]);
  return [ref, width];
}
