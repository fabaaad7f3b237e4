//! The app layer (egui). For now only its fonts; the lesson views and the shell come with the app.

pub mod fonts;
