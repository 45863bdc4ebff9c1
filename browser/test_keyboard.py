"""The console with the keyboard only: Tab to the key field, type, Enter to sign in; Tab to a
link (seeing where the focus is) and Enter to follow it.
"""

from __future__ import annotations

from selenium.webdriver.common.keys import Keys

from console import Console, wait_for


def outline(c: Console) -> str:
    """The focus ring a person sees around the focused element (`none` when there is none)."""
    return c.driver.execute_script(
        "const s = getComputedStyle(document.activeElement);"
        "return s.outlineStyle === 'none' || s.outlineWidth === '0px' ? 'none' : s.outlineStyle + ' ' + s.outlineWidth;"
    )


def on_screen(c: Console) -> bool:
    return c.driver.execute_script(
        "const r = document.activeElement.getBoundingClientRect();"
        "return r.width > 0 && r.height > 0 && r.left >= 0 && r.top >= 0 && r.right <= innerWidth && r.bottom <= innerHeight;"
    )


def test_sign_in_and_follow_a_link_with_the_keyboard(c: Console) -> None:
    c.driver.delete_all_cookies()
    c.open("/console")
    field = c.field("API key")
    # The sign-in page puts the focus in the key field; step out of it, then Tab back in.
    if c.focused() == field:
        c.press(Keys.SHIFT, Keys.TAB)
        assert c.focused() != field, "Shift+Tab did not leave the key field"
    c.tab_to(field)
    assert outline(c) != "none", "the focused key field shows no focus ring"
    c.press(c.api_key)
    c.press(Keys.ENTER)
    wait_for(lambda: c.find_control("Sign out"), f"Enter in the key field did not sign in: {c.excerpt()}")
    assert c.find_field("API key") is None, "still on the sign-in form"

    # From the top of the signed-in page, the first Tab reaches the skip link, shown on screen.
    c.press(Keys.TAB)
    first = c.focused()
    assert first.text == "Skip to content", f"the first Tab reached {first.text!r}, not the skip link"
    assert on_screen(c), "the focused skip link stays off screen"
    # Then on to the navigation's Sessions link, and Enter follows it.
    sessions = c.control("Sessions")
    c.tab_to(sessions)
    assert outline(c) != "none", "the focused link shows no focus ring"
    c.press(Keys.ENTER)
    wait_for(lambda: c.path() == "/console/sessions", f"Enter on Sessions led to {c.path()}")
    c.expect_text("Sessions")
    assert c.find_control("Sign out") is not None, "following the link signed out"
