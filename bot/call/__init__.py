"""One call: assembling the stages and what a call does when one fails."""
