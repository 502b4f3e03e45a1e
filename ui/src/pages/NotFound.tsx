// Any other address: say so, and offer the experiments list.
import { Link } from "react-router-dom";
import { useTitle } from "../components/common";

export function NotFoundPage() {
  useTitle("Not found · Stalwart");
  return (
    <>
      <h1>Page not found</h1>
      <p>This address shows nothing. <Link to="/experiments">Go to the experiments</Link>.</p>
    </>
  );
}
